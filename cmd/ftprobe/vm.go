package main

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/exitcode"
	"github.com/ftprobe/ftprobe/internal/lab"
)

func newVMCmd() *cobra.Command {
	var (
		kernelSpec, arch, accel, appendArgs, guestBin, execPath string
		cpus, memory                                            int
		timeout                                                 time.Duration
		add, env, qemuArgs                                      []string
		keep, printKernel                                       bool
	)
	cmd := &cobra.Command{
		Use:   "vm [flags] -- [ftprobe args]",
		Short: "Boot a real kernel under QEMU and run ftprobe (or a test binary) inside it",
		Long: `vm boots a kernel under QEMU with an initramfs holding a static ftprobe for
the guest architecture and a Go init, runs 'ftprobe ARGS' (or --exec PATH ARGS)
in the guest, streams the console and exits with the guest command's status.

--kernel is a path to a kernel image or debian:VERSION (7.3, 7.2, 6.12, 6.1,
latest; VERSION-rt, -16k or -cloud for Debian's PREEMPT_RT, 16 KiB-page and
cloud flavours, e.g. debian:7.3-rt), resolved through Debian's apt metadata from the archive this host's
apt already uses, downloaded once into the XDG cache (SHA-256 checked) and
extracted without installing.`,
		Example: `  ftprobe vm --kernel debian:7.3 --arch arm64 -- version
  ftprobe vm --kernel debian:6.12 --arch arm64 -- features
  ftprobe vm --kernel debian:7.3-rt --arch arm64 -- trace --mode ` + attach.ModeKprobeSession + ` vfs_read -- ftprobe workload read
  ftprobe vm --kernel ./arch/arm64/boot/Image -- trace vfs_read -- ftprobe workload read --count 3`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lab.CheckAdd(add); err != nil {
				return exitcode.Wrap(exitcode.BadInput, err)
			}
			if err := checkVMInput(arch, accel, guestBin, cpus, memory, timeout, env); err != nil {
				return exitcode.Wrap(exitcode.BadInput, err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			k, err := resolveKernel(ctx, kernelSpec, arch, cmd)
			if err != nil {
				return err
			}
			if printKernel {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\n", k.Image)
				return nil
			}
			bin, err := findGuestBinary(guestBin, k.Arch)
			if err != nil {
				return exitcode.Wrap(exitcode.BadInput, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "ftprobe vm: booting %s\n", k)
			res, err := lab.Run(ctx, lab.Config{
				Kernel: k, Binary: bin, Exec: execPath, Args: args, Env: env, Add: add,
				CPUs: cpus, MemoryMB: memory, Timeout: timeout, Accel: accel,
				Append: appendArgs, QemuArgs: qemuArgs, Keep: keep,
				Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(),
			})
			if err != nil {
				return exitcode.Wrap(exitcode.Failure, fmt.Errorf("vm: %w", err))
			}
			if res.Initramfs != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "ftprobe vm: initramfs kept at %s\n", res.Initramfs)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "ftprobe vm: guest %s (%s), exit status %d; initramfs %.2fs, guest command started %.2fs after qemu (guest uptime %.2fs: harness overhead %.2fs), total %.1fs\n",
				res.Release, res.Accel, res.ExitStatus, res.Prepare.Seconds(), res.Boot.Seconds(), res.KernelUp.Seconds(),
				(res.Prepare + res.Boot - res.KernelUp).Seconds(), res.Total.Seconds())
			if res.ExitStatus != 0 {
				return exitcode.Status(res.ExitStatus)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kernelSpec, "kernel", "debian:7.3", "kernel image path or debian:VERSION[-rt|-16k|-cloud] (7.3, 7.2, 6.12, 6.1, latest)")
	f.StringVar(&arch, "arch", "", "guest architecture, arm64 or amd64 (default: from the image; arm64 for debian:)")
	f.IntVar(&cpus, "cpus", 2, "guest CPUs")
	f.IntVar(&memory, "memory", 1024, "guest memory in MiB")
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "kill the guest after this long")
	f.StringVar(&accel, "accel", "auto", "auto, kvm, tcg or icount (auto falls back to TCG when KVM cannot boot the kernel; icount: TCG whose guest clock counts executed instructions, one nanosecond each, so timings such as compare's do not depend on host load)")
	f.StringArrayVar(&add, "add", nil, "carry HOST:GUEST file into the guest (repeatable)")
	f.StringArrayVar(&env, "env", nil, "KEY=VALUE for the guest command (repeatable)")
	f.StringVar(&appendArgs, "append", "", "extra kernel parameters")
	f.StringArrayVar(&qemuArgs, "qemu-arg", nil, "extra QEMU argument (repeatable), e.g. --qemu-arg=-plugin --qemu-arg=scripts/insnprof/insnprof.so,out=prof.txt (scripts/insnprof/profile.sh)")
	f.BoolVar(&keep, "keep", false, "keep the initramfs and print its path")
	f.StringVar(&guestBin, "guest-binary", "", "static ftprobe for the guest architecture (default: this binary or ftprobe-linux-ARCH beside it)")
	f.StringVar(&execPath, "exec", "", "run this guest path (e.g. a test binary carried with --add) instead of ftprobe")
	f.BoolVar(&printKernel, "print-kernel", false, "resolve and download the kernel, print its image path and exit")
	return cmd
}

func resolveKernel(ctx context.Context, spec, arch string, cmd *cobra.Command) (*lab.Kernel, error) {
	if v, ok := strings.CutPrefix(spec, "debian:"); ok {
		if arch == "" {
			arch = "arm64"
		}
		k, err := lab.ResolveDebian(ctx, v, arch, cmd.ErrOrStderr())
		if err != nil {
			return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("vm: %w", err))
		}
		return k, nil
	}
	detected, err := lab.DetectArch(spec)
	if err != nil && arch == "" {
		return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("vm --kernel %s: %w", spec, err))
	}
	if arch == "" {
		arch = detected
	}
	if arch != "arm64" && arch != "amd64" {
		return nil, exitcode.Wrap(exitcode.BadInput, fmt.Errorf("vm --arch %q: want arm64 or amd64", arch))
	}
	return &lab.Kernel{Arch: arch, Image: spec}, nil
}

// findGuestBinary returns a static ftprobe for arch: the explicit path,
// else ftprobe-linux-ARCH beside this executable, else this executable when
// the architectures match.
// A binary beside it that is not this one's build (sameBuild) is an error:
// after `make build` alone the guest binaries are older than this one, and
// a benchmark run in the guest would measure their BPF objects silently.
func findGuestBinary(explicit, arch string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	cand := filepath.Join(filepath.Dir(self), "ftprobe-linux-"+arch)
	if _, err := os.Stat(cand); err == nil {
		if err := sameBuild(self, cand); err != nil {
			return "", fmt.Errorf("vm: %w: run `make cross` or pass --guest-binary", err)
		}
		return cand, nil
	}
	if runtime.GOARCH == arch {
		return self, nil
	}
	return "", fmt.Errorf("vm: no ftprobe built for %s beside %s: run `make cross` or pass --guest-binary", arch, self)
}

// checkVMInput checks vm's flag values before any kernel is resolved or
// downloaded; the caller maps an error to bad input (exit 2).
func checkVMInput(arch, accel, guestBin string, cpus, memoryMiB int, timeout time.Duration, env []string) error {
	if arch != "" && arch != "arm64" && arch != "amd64" {
		return fmt.Errorf("vm --arch %q: want arm64 or amd64", arch)
	}
	if accel != "auto" && accel != "kvm" && accel != "tcg" && accel != "icount" {
		return fmt.Errorf("vm --accel %q: want auto, kvm, tcg or icount", accel)
	}
	if cpus < 1 {
		return fmt.Errorf("vm --cpus %d: want 1 or more", cpus)
	}
	if memoryMiB < 128 {
		return fmt.Errorf("vm --memory %d: want at least 128 (MiB; a Debian kernel and the initramfs need it)", memoryMiB)
	}
	if timeout <= 0 {
		return fmt.Errorf("vm --timeout %s: want more than 0", timeout)
	}
	for _, e := range env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return fmt.Errorf("vm --env %q: want KEY=VALUE", e)
		}
	}
	if guestBin != "" {
		if _, err := os.Stat(guestBin); err != nil {
			return fmt.Errorf("vm --guest-binary: %w", err)
		}
	}
	return nil
}

// staleAfter is how much older than this executable a guest binary beside
// it may be and still count as the same build (make cross builds the
// host's and the cross binaries seconds apart).
const staleAfter = 2 * time.Minute

// sameBuild checks that guest was built from the same code as self: the
// same vcs.revision and vcs.modified in their Go build info (go version
// -m), and, since a modified tree records no content hash, a modification
// time at most staleAfter before self's. Errors name both files and the
// difference.
func sameBuild(self, guest string) error {
	same, err := vcsMismatch(guest, vcsOf, self)
	if err != nil {
		return err
	}
	if same {
		return nil // one clean revision: the same code, whenever built
	}
	si, err := os.Stat(self)
	if err != nil {
		return err
	}
	gi, err := os.Stat(guest)
	if err != nil {
		return err
	}
	if d := si.ModTime().Sub(gi.ModTime()); d > staleAfter {
		return fmt.Errorf("%s is %s older than %s and may not hold its code or BPF objects", guest, d.Round(time.Second), self)
	}
	return nil
}

// vcsOf returns the vcs.revision and vcs.modified a Go binary was stamped
// with, or "" for a file without them (not Go, or built without VCS
// stamping, as test binaries are).
func vcsOf(path string) (rev, modified string) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", ""
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	return rev, modified
}

// vcsMismatch compares the vcs stamps (read by of) of guest and self: an
// error when both have one and the revision or the modified flag differs;
// same when both are the same unmodified revision (a modified tree records
// no content hash, so two builds of it cannot be told apart this way).
func vcsMismatch(guest string, of func(string) (string, string), self string) (same bool, err error) {
	sr, sm := of(self)
	gr, gm := of(guest)
	if sr == "" || gr == "" {
		return false, nil
	}
	if sr != gr || sm != gm {
		return false, fmt.Errorf("%s was built from %s (modified %s), %s from %s (modified %s)", guest, gr, gm, self, sr, sm)
	}
	return sm == "false", nil
}
