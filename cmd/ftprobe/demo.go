package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/trace"
	"github.com/ftprobe/ftprobe/internal/trial"
)

// demoModes are the trace modes demo runs, one after the other: a
// trampoline mode and an fprobe one.
var demoModes = []string{attach.ModeFentryFexit, attach.ModeKprobeMulti}

func newDemoCmd() *cobra.Command {
	count := 3
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Trace a built-in workload (open + read of /etc/hostname) in the " + andList(demoModes) + " modes, one after the other",
		Long: wrap("demo runs 'ftprobe workload' under 'ftprobe trace do_sys_openat2 vfs_read' once in each of the "+andList(demoModes)+
			" modes, so both paths show the same calls side by side. `make demo` runs it in the lab: ftprobe vm --kernel debian:7.3 --arch arm64 -- demo", "", "", helpWidth),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			kin := kfeat.Load()
			k, _, err := trial.LoadKernel(kin)
			if err != nil {
				return symbolsError("demo", err)
			}
			off, err := noSpecialize()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			ran := 0
			var lastErr error
			for _, mode := range demoModes {
				fmt.Fprintf(w, "\n=== %s on %s: ftprobe trace --mode %s do_sys_openat2 vfs_read -- ftprobe workload read --count %d\n", mode, kin, mode, count)
				_, err := trace.Run(cmd.Context(), trace.Options{
					Patterns: []string{"do_sys_openat2", "vfs_read"}, Mode: mode, Output: "text",
					Out: w, Log: w, Symbols: k, Self: self,
					Command:      []string{self, "workload", "read", "--count", fmt.Sprint(count)},
					NoSpecialize: off,
				})
				if err != nil {
					fmt.Fprintf(w, "ftprobe: %s: %v\n", mode, err)
					lastErr = err
					if !errors.Is(err, kfeat.ErrUnsupported) {
						return traceExit(err)
					}
					continue
				}
				ran++
			}
			if ran == 0 {
				return traceExit(lastErr)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&count, "count", count, "reads of /etc/hostname by the workload")
	return cmd
}
