package main

import (
	"encoding/json"
	"fmt"
	"strings"
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
			modes := []string{symbols.ModeFentry, symbols.ModeFSession, symbols.ModeFentryMulti, symbols.ModeKprobeMulti, symbols.ModeKprobe}
			if asJSON {
				type verdict struct {
					OK     bool   `json:"ok"`
					Reason string `json:"reason,omitempty"`
				}
				type row struct {
					Name      string             `json:"name"`
					Module    string             `json:"module,omitempty"`
					Addr      string             `json:"address"`
					Copies    int                `json:"copies"`
					Prototype string             `json:"prototype,omitempty"`
					Modes     map[string]verdict `json:"modes"` // per mode: traceable, or the reason it is not
				}
				var rows []row
				for _, f := range fs {
					r := row{Name: f.Name, Module: f.Module, Addr: fmt.Sprintf("%#x", f.Addr), Copies: f.Copies, Modes: map[string]verdict{}}
					if f.Proto != nil {
						r.Prototype = events.Signature(f)
					}
					for _, m := range modes {
						r.Modes[m] = verdict{OK: f.Skip[m] == "", Reason: f.Skip[m]}
					}
					rows = append(rows, r)
				}
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			// One column per mode: "ok", or "no [n]" with the reason n
			// listed once under the table.
			var reasons []string
			num := map[string]int{}
			cell := func(why string) string {
				if why == "" {
					return "ok"
				}
				if _, ok := num[why]; !ok {
					reasons = append(reasons, why)
					num[why] = len(reasons)
				}
				return fmt.Sprintf("no [%d]", num[why])
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprint(tw, "FUNCTION\tADDRESS\tCOPIES")
			for _, m := range modes {
				fmt.Fprint(tw, "\t"+strings.ToUpper(m))
			}
			fmt.Fprintln(tw, "\tPROTOTYPE")
			for _, f := range fs {
				proto := "(no BTF)"
				if f.Proto != nil {
					proto = events.Signature(f)
				}
				fmt.Fprintf(tw, "%s\t%#x\t%d", f.Display(), f.Addr, f.Copies)
				for _, m := range modes {
					fmt.Fprint(tw, "\t"+cell(f.Skip[m]))
				}
				fmt.Fprintf(tw, "\t%s\n", proto)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for i, r := range reasons {
				fmt.Fprintf(w, "[%d] %s\n", i+1, r)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&excludes, "exclude", nil, "remove functions matching GLOB")
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON output")
	return cmd
}
