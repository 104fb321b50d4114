// Command ftprobe is a live Linux kernel function tracer: fentry/fexit
// through ftrace direct-call trampolines, or kprobe.multi through fprobe.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/ftprobe/ftprobe/internal/exitcode"
	"github.com/ftprobe/ftprobe/internal/guest"
)

func main() {
	if guest.IsInit() {
		guest.Init()
	}
	cmd := newRootCmd()
	err := cmd.Execute()
	if err != nil && strings.HasPrefix(err.Error(), "unknown command ") {
		err = exitcode.Wrap(exitcode.BadInput, err) // cobra's, with its suggestions
	}
	code, silent := exitcode.Of(err)
	if err != nil && !silent {
		fmt.Fprintf(os.Stderr, "ftprobe: %v\n", err)
	}
	os.Exit(code)
}
