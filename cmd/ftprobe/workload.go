package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ftprobe/ftprobe/internal/exitcode"
	"github.com/ftprobe/ftprobe/internal/workload"
)

func newWorkloadCmd() *cobra.Command {
	var s workload.Spec
	var quiet bool
	var children int
	cmd := &cobra.Command{
		Use:   "workload open|openfail|read|syscall",
		Short: "Generate known kernel activity (opens, reads, syscalls) for demos and tests",
		Long: `workload makes kernel calls whose arguments and results are known, on one
locked OS thread, and prints what it did (pid, tid, operations, last fd,
bytes, errors):
  open      --count opens of --path relative to AT_FDCWD (do_sys_openat2 with
            dfd -100), each closed again
  openfail  --count opens of a missing file (-ENOENT)
  read      one open of --path, then --count reads of 1 byte (vfs_read with
            count 1), rewinding at the end of the file
  syscall   --count getppid(2) calls`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"open", "openfail", "read", "syscall"},
		RunE: func(cmd *cobra.Command, args []string) error {
			s.Kind = args[0]
			if s.Interval < 0 {
				return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("workload --interval %s: want 0 or more", s.Interval))
			}
			if s.Kind == "openfail" && !cmd.Flags().Changed("path") {
				s.Path = "/nonexistent/ftprobe-openfail"
			}
			if children < 0 {
				return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("workload --children %d: want 0 or more", children))
			}
			// Each child is this program again (fork+exec of
			// /proc/self/exe), run to completion before this process
			// does its own share: a process tree for --  COMMAND tests.
			for i := 0; i < children; i++ {
				c := exec.Command("/proc/self/exe", "workload", s.Kind, "--path", s.Path, "--count", strconv.Itoa(s.Count),
					"--interval", s.Interval.String(), "--quiet="+strconv.FormatBool(quiet))
				c.Stdout, c.Stderr = cmd.OutOrStdout(), os.Stderr
				if err := c.Run(); err != nil {
					return exitcode.Wrap(exitcode.Failure, fmt.Errorf("workload --children: child %d: %w", i+1, err))
				}
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
	cmd.Flags().StringVar(&s.Path, "path", "/etc/hostname", "file to open or read (openfail's default: /nonexistent/ftprobe-openfail)")
	cmd.Flags().DurationVar(&s.Interval, "interval", 0, "pause between operations")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print nothing")
	cmd.Flags().IntVar(&children, "children", 0, "also run the workload in this many child processes, one after another, before this one")
	return cmd
}
