package main

import (
	"fmt"
	"runtime"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print ftprobe's version, revision, Go version, BPF object hashes and the running kernel",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "ftprobe %s (revision %s, %s, %s/%s)\n", version, revision, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			objs := bpfobj.Objects()
			names := make([]string, 0, len(objs))
			for n := range objs {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				fmt.Fprintf(w, "bpf object %s.bpf.o sha256 %s\n", n, objs[n])
			}
			var u unix.Utsname
			if err := unix.Uname(&u); err == nil {
				fmt.Fprintf(w, "kernel %s %s\n", cstr(u.Release[:]), cstr(u.Machine[:]))
			}
			return nil
		},
	}
}

func cstr(b []byte) string { return strings.TrimRight(string(b), "\x00") }
