package main

import (
	"github.com/spf13/cobra"
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
	return root
}
