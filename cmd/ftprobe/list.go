package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ftprobe/ftprobe/internal/events"
	"github.com/ftprobe/ftprobe/internal/exitcode"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

func newListCmd() *cobra.Command {
	var excludes []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list PATTERN...",
		Short: "List matching kernel functions with address, module, BTF prototype and, per mode, whether they can be traced and why not",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kin := kfeat.Load()
			k, err := symbols.LoadKernel(kin.Arch, kin.MaxTrampolineArgs())
			if err != nil {
				return exitcode.Wrap(exitcode.Unsupported, err)
			}
			fs, err := k.Match(args, excludes)
			if err != nil {
				return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("list: %w", err))
			}
			w := cmd.OutOrStdout()
			if asJSON {
				type row struct {
					Name      string            `json:"name"`
					Module    string            `json:"module,omitempty"`
					Addr      string            `json:"address"`
					Copies    int               `json:"copies"`
					Prototype string            `json:"prototype,omitempty"`
					Modes     map[string]string `json:"modes"` // mode -> "ok" or the reason
				}
				var rows []row
				for _, f := range fs {
					r := row{Name: f.Name, Module: f.Module, Addr: fmt.Sprintf("%#x", f.Addr), Copies: f.Copies, Modes: map[string]string{}}
					if f.Proto != nil {
						r.Prototype = events.Signature(f)
					}
					for _, m := range []string{symbols.ModeFentry, symbols.ModeKprobeMulti} {
						r.Modes[m] = orOK(f.Skip[m])
					}
					rows = append(rows, r)
				}
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "FUNCTION\tADDRESS\tCOPIES\tFENTRY\tKPROBE-MULTI\tPROTOTYPE")
			for _, f := range fs {
				proto := "(no BTF)"
				if f.Proto != nil {
					proto = events.Signature(f)
				}
				fmt.Fprintf(tw, "%s\t%#x\t%d\t%s\t%s\t%s\n", f.Display(), f.Addr, f.Copies, orOK(f.Skip[symbols.ModeFentry]), orOK(f.Skip[symbols.ModeKprobeMulti]), proto)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringArrayVar(&excludes, "exclude", nil, "remove functions matching GLOB")
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON output")
	return cmd
}

func orOK(s string) string {
	if s == "" {
		return "ok"
	}
	return s
}
