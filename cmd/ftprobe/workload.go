package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/ftprobe/ftprobe/internal/exitcode"
	"github.com/ftprobe/ftprobe/internal/workload"
)

func newWorkloadCmd() *cobra.Command {
	var s workload.Spec
	var quiet bool
	cmd := &cobra.Command{
		Use:       "workload open|openfail|read|syscall",
		Short:     "Generate known kernel activity (opens, reads, syscalls) for demos and tests",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"open", "openfail", "read", "syscall"},
		RunE: func(cmd *cobra.Command, args []string) error {
			s.Kind = args[0]
			if s.Kind == "openfail" && !cmd.Flags().Changed("path") {
				s.Path = "/nonexistent/ftprobe-openfail"
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			r, err := workload.Run(s)
			if err != nil {
				return exitcode.Wrap(exitcode.BadInput, err)
			}
			if !quiet {
				fmt.Fprintln(cmd.OutOrStdout(), r.Describe(s))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&s.Count, "count", 3, "operations")
	cmd.Flags().StringVar(&s.Path, "path", "/etc/hostname", "file to open or read (openfail: a missing file, default /nonexistent/ftprobe-openfail)")
	cmd.Flags().DurationVar(&s.Interval, "interval", 0, "pause between operations")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print nothing")
	return cmd
}
