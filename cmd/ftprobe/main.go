// Command ftprobe is a live Linux kernel function tracer: fentry/fexit
// through ftrace direct-call trampolines, or kprobe.multi through fprobe.
package main

import (
	"fmt"
	"os"

	"github.com/ftprobe/ftprobe/internal/exitcode"
	"github.com/ftprobe/ftprobe/internal/guest"
)

func main() {
	if guest.IsInit() {
		guest.Init()
	}
	cmd := newRootCmd()
	err := cmd.Execute()
	code, silent := exitcode.Of(err)
	if err != nil && !silent {
		fmt.Fprintf(os.Stderr, "ftprobe: %v\n", err)
	}
	os.Exit(code)
}
