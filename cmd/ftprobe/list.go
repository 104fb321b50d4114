package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ftprobe/ftprobe/internal/events"
	"github.com/ftprobe/ftprobe/internal/exitcode"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/symbols"
	"github.com/ftprobe/ftprobe/internal/trial"
)

func newListCmd() *cobra.Command {
	var excludes []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list PATTERN...",
		Short: "List matching kernel functions with address, module, BTF prototype and, per mode, whether they can be traced and why not",
		Long: `list resolves PATTERNs as trace does (an exact name, a glob, 'name [module]',
module:glob, name@ADDRESS) and prints each matching function: its address,
how many copies the kernel has of the name, its BTF prototype, and one
column per trace mode saying whether that mode can trace it ("ok", "entry
only") or why not, with what would make it traceable where that is known.
The columns judge the function, not the kernel: whether this kernel has a
mode at all is what ftprobe features answers. --json writes one object per
function (name, module, address, copies, prototype, and modes: a verdict
per mode with ok, reason, entry_only and fix).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, p := range append(append([]string{}, args...), excludes...) {
				if _, err := symbols.ParsePattern(p); err != nil {
					return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("list: %w", err))
				}
			}
			kin := kfeat.Load()
			k, _, err := trial.LoadKernel(kin)
			if err != nil {
				return symbolsError("list", err)
			}
			fs, err := k.Match(args, excludes)
			if err != nil {
				return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("list: %w", err))
			}
			if asJSON {
				return writeListJSON(cmd.OutOrStdout(), k, fs)
			}
			return writeListText(cmd.OutOrStdout(), k, fs)
		},
	}
	cmd.Flags().StringArrayVar(&excludes, "exclude", nil, "remove functions matching GLOB")
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON output")
	return cmd
}

// listVerdict is one mode's verdict on a function in list --json.
type listVerdict struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
	// EntryOnly: traced at entry only, and why ("noreturn").
	EntryOnly string `json:"entry_only,omitempty"`
	// Fix says what would make it traceable, where known:
	// another mode, the original of a copy, name@ADDRESS.
	Fix string `json:"fix,omitempty"`
}

// listRow is one function in list --json.
type listRow struct {
	Name      string                 `json:"name"`
	Module    string                 `json:"module,omitempty"`
	Addr      string                 `json:"address"`
	Copies    int                    `json:"copies"`
	Prototype string                 `json:"prototype,omitempty"`
	Modes     map[string]listVerdict `json:"modes"` // per mode: traceable, or the reason it is not
}

// writeListJSON writes the functions as one JSON array of listRow.
func writeListJSON(w io.Writer, k *symbols.Kernel, fs []*symbols.Func) error {
	var rows []listRow
	for _, f := range fs {
		r := listRow{Name: f.Name, Module: f.Module, Addr: fmt.Sprintf("%#x", f.Addr), Copies: f.Copies, Modes: map[string]listVerdict{}}
		if f.Proto != nil {
			r.Prototype = events.Signature(f)
		}
		for _, m := range symbols.Modes {
			r.Modes[m] = listVerdict{OK: f.Skip[m] == "", Reason: f.Skip[m], Fix: k.Fix(f, m)}
			if f.Skip[m] == "" {
				r.Modes[m] = listVerdict{OK: true, EntryOnly: f.EntryOnly}
			}
		}
		rows = append(rows, r)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

// writeListText writes the functions as a table with one column per mode:
// "ok", "entry only [n]" or "no [n]" with the reason n (and what would
// make the function traceable, where known) listed once under the table.
func writeListText(w io.Writer, k *symbols.Kernel, fs []*symbols.Func) error {
	var reasons []string
	num := map[string]int{}
	note := func(why string) int {
		if _, ok := num[why]; !ok {
			reasons = append(reasons, why)
			num[why] = len(reasons)
		}
		return num[why]
	}
	cell := func(f *symbols.Func, m string) string {
		switch why := f.Skip[m]; {
		case why != "":
			if fix := k.Fix(f, m); fix != "" {
				why += "; " + fix
			}
			return fmt.Sprintf("no [%d]", note(why))
		case f.EntryOnly != "":
			return fmt.Sprintf("entry only [%d]", note("entry only: "+f.EntryOnly+" (its exit cannot be hooked: entries are traced, no exits)"))
		}
		return "ok"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "FUNCTION\tADDRESS\tCOPIES")
	for _, m := range symbols.Modes {
		fmt.Fprint(tw, "\t"+strings.ToUpper(m))
	}
	fmt.Fprintln(tw, "\tPROTOTYPE")
	for _, f := range fs {
		proto := "(no BTF)"
		if f.Proto != nil {
			proto = events.Signature(f)
		}
		fmt.Fprintf(tw, "%s\t%#x\t%d", f.Display(), f.Addr, f.Copies)
		for _, m := range symbols.Modes {
			fmt.Fprint(tw, "\t"+cell(f, m))
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
}
