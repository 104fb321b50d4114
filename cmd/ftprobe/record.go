package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/ftprobe/ftprobe/internal/exitcode"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/plural"
	"github.com/ftprobe/ftprobe/internal/symbols/recorder"
)

func newInternalRecordSymbolsCmd() *cobra.Command {
	var (
		out, fromConsole string
		perRule          int
		modules          []string
		printOut         bool
	)
	cmd := &cobra.Command{
		Use:    "internal-record-symbols --out DIR [--print] | --from-console FILE --out DIR",
		Short:  "Record symbol-resolution fixtures from the running kernel (or extract them from a console capture)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("internal-record-symbols: --out is required"))
			}
			if fromConsole != "" {
				in := os.Stdin
				if fromConsole != "-" {
					f, err := os.Open(fromConsole)
					if err != nil {
						return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("--from-console: %w", err))
					}
					defer f.Close()
					in = f
				}
				files, err := recorder.ExtractArchive(in, out)
				if err != nil {
					return exitcode.Wrap(exitcode.Failure, err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "ftprobe: extracted %s into %s\n", plural.Count(len(files), "file"), out)
				return nil
			}
			for _, m := range modules {
				if err := recorder.LoadModule(m); err != nil {
					return exitcode.Wrap(exitcode.Failure, err)
				}
			}
			kin := kfeat.Load()
			maxArgs, _, _ := kin.DocumentedTrampolineLimits()
			meta, err := recorder.RecordSymbols(out, kin.Arch, maxArgs, perRule)
			if err != nil {
				return exitcode.Wrap(exitcode.Unsupported, fmt.Errorf("internal-record-symbols: %w", err))
			}
			for rule, names := range meta.Rules {
				fmt.Fprintf(cmd.ErrOrStderr(), "ftprobe: %s: %v\n", rule, names)
			}
			if printOut {
				return recorder.WriteArchive(cmd.OutOrStdout(), out)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "directory to write the fixture set into")
	f.IntVar(&perRule, "per-rule", 3, "functions recorded per resolution rule")
	f.BoolVar(&printOut, "print", false, "also print the files as a marked base64 block on stdout (for a VM console)")
	f.StringArrayVar(&modules, "load-module", nil, "load this kernel module file first, so that module functions are recorded (repeatable)")
	f.StringVar(&fromConsole, "from-console", "", "extract a printed block from this console capture ('-' for stdin) into --out")
	return cmd
}
