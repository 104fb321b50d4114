package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ftprobe/ftprobe/internal/attach"
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
		Short: "Live kernel function tracer over every attach path: BPF trampolines, fprobe and kprobes",
		Long: wrap("ftprobe traces kernel functions on a live host through the kernel's attach paths: "+pathGroups()+
			". It streams entry and exit events through a record buffer per CPU (trace) or counts calls in the kernel (stat), reports which paths work on this kernel (features), and benchmarks them side by side (compare), with the tracepoint paths ("+strings.Join(tracepointPaths(), ", ")+") as references.", "", "", helpWidth) + `
Exit codes: 0 ok, 1 runtime failure, 2 bad input, 3 unsupported on this
kernel; 'vm' and 'trace -- COMMAND' pass the command's status through.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCmd(), newVMCmd(), newWorkloadCmd(), newTraceCmd(), newStatCmd(), newInternalExecCmd(), newFeaturesCmd(), newDemoCmd(), newCompareCmd(), newListCmd(), newInternalRecordSymbolsCmd())
	// Bad flags, values and argument counts are bad input (exit 2), like
	// the errors the commands check themselves; an unknown command too.
	// (An unknown command is cobra's own error, with its suggestions:
	// main maps it to bad input.)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitcode.Wrap(exitcode.BadInput, err) })
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	badArgs(root)
	strictHelp(root)
	strictCompletion(root)
	return root
}

// strictCompletion makes `completion SHELL` of an unknown shell bad input
// (exit 2): cobra's completion command has no Run of its own, so it
// prints its help for any argument and succeeds.
func strictCompletion(root *cobra.Command) {
	c, _, err := root.Find([]string{"completion"})
	if err != nil || c == root || c.Runnable() {
		return
	}
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			var shells []string
			for _, s := range c.Commands() {
				shells = append(shells, s.Name())
			}
			return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("completion %s: unknown shell (want %s)", args[0], strings.Join(shells, ", ")))
		}
		return c.Help()
	}
}

// strictHelp makes `help TOPIC` of an unknown topic bad input (exit 2):
// cobra's help command prints "Unknown help topic" and succeeds.
func strictHelp(root *cobra.Command) {
	h, _, err := root.Find([]string{"help"})
	if err != nil || h == root || h.Run == nil {
		return
	}
	show := h.Run
	h.Run = nil
	h.RunE = func(c *cobra.Command, args []string) error {
		if t, _, err := c.Root().Find(args); t == nil || err != nil {
			return exitcode.Wrap(exitcode.BadInput, fmt.Errorf("help %s: unknown help topic (ftprobe help lists the commands)", strings.Join(args, " ")))
		}
		show(c, args)
		return nil
	}
}

// tracepointPaths are the attach paths of attach.Paths that reach a
// tracepoint, not a function.
func tracepointPaths() []string {
	return []string{string(attach.PathTPBTF), string(attach.PathRawTP)}
}

// pathGroups names the function attach paths of attach.Paths by what
// reaches them: "BPF trampolines reached by ftrace direct calls (fentry,
// ...), fprobe (...) or kprobes (...)".
func pathGroups() string {
	groups := []struct {
		what  string
		paths []string
	}{{what: "BPF trampolines reached by ftrace direct calls"}, {what: "fprobe"}, {what: "kprobes"}}
	for _, p := range attach.Paths {
		i := 2
		switch {
		case slices.Contains(tracepointPaths(), string(p.Path)):
			continue
		case p.Trampoline:
			i = 0
		case p.Multi:
			i = 1
		}
		groups[i].paths = append(groups[i].paths, string(p.Path))
	}
	var parts []string
	for _, g := range groups {
		if len(g.paths) > 0 {
			parts = append(parts, g.what+" ("+strings.Join(g.paths, ", ")+")")
		}
	}
	return orList(parts)
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
