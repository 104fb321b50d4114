// Command ftprobe is a live Linux kernel function tracer: fentry/fexit
// through ftrace direct-call trampolines, or kprobe.multi through fprobe.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ftprobe/ftprobe/internal/exitcode"
	"github.com/ftprobe/ftprobe/internal/guest"
)

func main() {
	if guest.IsInit() {
		guest.Init()
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one ftprobe command line and returns its exit code (0 ok,
// 1 runtime failure, 2 bad input, 3 unsupported, or a child's status),
// printing the error, if any, to stderr as "ftprobe: ...".
func run(args []string, stdout, stderr io.Writer) int {
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.Execute()
	if err != nil && strings.HasPrefix(err.Error(), "unknown command ") {
		err = exitcode.Wrap(exitcode.BadInput, err) // cobra's, with its suggestions
	}
	code, silent := exitcode.Of(err)
	if err != nil && !silent {
		fmt.Fprintf(stderr, "ftprobe: %v\n", err)
	}
	return code
}
