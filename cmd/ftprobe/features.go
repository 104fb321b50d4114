package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/features"
	"github.com/ftprobe/ftprobe/internal/kfeat"
)

func newFeaturesCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "features",
		Short: "Report which attach paths work on this kernel, proven by a real load and attach, with reasons",
		Long: wrap("features loads a trivial counting program through each attach path ("+strings.Join(features.Paths, ", ")+
			"), attaches it to "+features.Target+" ("+string(attach.PathTPBTF)+": to the sys_enter tracepoint), detaches it, and reports the kernel release, BTF, tracefs, lockdown, capabilities and the kernel config that decides each verdict.", "", "", helpWidth) +
			`Without CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) it still prints the
report, then exits 2 naming the missing capabilities.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := features.Probe(kfeat.Load())
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return err
				}
				return needPrivilege("features")
			}
			fmt.Fprintf(w, "kernel      %s %s", r.Release, r.Arch)
			if r.Emulated != "" {
				fmt.Fprintf(w, " (%s)", r.Emulated)
			}
			fmt.Fprintf(w, "\nBTF         vmlinux %v, %d modules\n", yesno(r.VmlinuxBTF), r.ModuleBTF)
			fmt.Fprintf(w, "tracefs     %s\n", map[bool]string{true: "mounted", false: "not mounted (mount -t tracefs tracefs /sys/kernel/tracing)"}[r.Tracefs])
			fmt.Fprintf(w, "lockdown    %s\n", r.Lockdown)
			fmt.Fprintf(w, "caps        %s\n", strings.Join(r.Capabilities, " "))
			src := r.ConfigSource
			if src == "" {
				src = "not found (/proc/config.gz, /boot/config-RELEASE)"
			}
			fmt.Fprintf(w, "config      %s\n", src)
			keys := make([]string, 0, len(r.Config))
			for k := range r.Config {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(w, "  %-42s %s\n", k, r.Config[k])
			}
			fmt.Fprintln(w)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ATTACH PATH\tWORKS\tREASON")
			for _, m := range r.Paths {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", m.Path, yesno(m.Works), m.Reason)
			}
			tw.Flush()
			if r.Hint != "" {
				fmt.Fprintf(w, "\nhint: %s\n", r.Hint)
			}
			// Without the capabilities no verdict above is about the
			// kernel: exit 2 like trace and compare, naming what is missing.
			return needPrivilege("features")
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON output")
	return cmd
}

func yesno(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
