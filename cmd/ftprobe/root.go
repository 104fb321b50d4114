package main

import (
	"github.com/spf13/cobra"

	"github.com/ftprobe/ftprobe/internal/exitcode"
)

// Set by the Makefile through -ldflags -X.
var (
	version  = "dev"
	revision = "unknown"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "ftprobe",
		Short: "Live kernel function tracer: fentry/fexit trampolines or kprobe.multi (fprobe)",
		Long: `ftprobe traces kernel functions on a live host through BPF trampolines
(fentry/fexit, reached by ftrace direct calls) or through fprobe
(kprobe.multi/kretprobe.multi), streams entry and exit events through a BPF
ringbuf, and benchmarks the two attach paths side by side.

Exit codes: 0 ok, 1 runtime failure, 2 bad input, 3 unsupported on this
kernel; 'vm' and 'trace -- COMMAND' pass the command's status through.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCmd(), newVMCmd(), newWorkloadCmd(), newTraceCmd(), newInternalExecCmd(), newFeaturesCmd(), newDemoCmd(), newCompareCmd(), newListCmd(), newInternalRecordSymbolsCmd())
	// Bad flags, values and argument counts are bad input (exit 2), like
	// the errors the commands check themselves; an unknown command too.
	// (An unknown command is cobra's own error, with its suggestions:
	// main maps it to bad input.)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitcode.Wrap(exitcode.BadInput, err) })
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	badArgs(root)
	return root
}

// badArgs makes every command's argument validation return bad input.
func badArgs(c *cobra.Command) {
	if v := c.Args; v != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := v(cmd, args); err != nil {
				return exitcode.Wrap(exitcode.BadInput, err)
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		badArgs(sub)
	}
}
