// Package kfeat describes the running kernel for tracing: release and
// version, architecture, kernel config, tracefs, lockdown, capabilities, and
// turns kernel errors into reasons a kernel engineer can act on.
package kfeat

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Info is the static description of the running kernel.
type Info struct {
	Release  string            `json:"release"` // uname -r
	Arch     string            `json:"arch"`    // Go name: arm64, amd64
	Major    int               `json:"major"`
	Minor    int               `json:"minor"`
	Config   map[string]string `json:"-"` // CONFIG_X -> y/m/value; nil when unknown
	ConfigAt string            `json:"config_source,omitempty"`
	Emulated string            `json:"emulated,omitempty"` // e.g. "QEMU TCG" when detected, EmulatedIcount under ftprobe vm --accel icount
}

// ConfigKeys are the kernel options ftprobe reports.
var ConfigKeys = []string{
	"CONFIG_DEBUG_INFO_BTF", "CONFIG_DEBUG_INFO_BTF_MODULES", "CONFIG_FTRACE",
	"CONFIG_DYNAMIC_FTRACE", "CONFIG_DYNAMIC_FTRACE_WITH_REGS", "CONFIG_DYNAMIC_FTRACE_WITH_ARGS",
	"CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS", "CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS", "CONFIG_HAVE_SINGLE_FTRACE_DIRECT_OPS",
	"CONFIG_FUNCTION_GRAPH_TRACER", "CONFIG_FPROBE", "CONFIG_KPROBES", "CONFIG_KPROBE_EVENTS",
	"CONFIG_BPF_JIT", "CONFIG_BPF_EVENTS", "CONFIG_CFI_CLANG", "CONFIG_MITIGATION_RETPOLINE",
	"CONFIG_MITIGATION_RETHUNK", "CONFIG_SECURITY_LOCKDOWN_LSM",
}

// Load reads uname and the kernel config (/proc/config.gz, then
// /boot/config-RELEASE).
func Load() *Info {
	var u unix.Utsname
	unix.Uname(&u)
	in := &Info{Release: strings.TrimRight(string(u.Release[:]), "\x00"), Arch: runtime.GOARCH}
	in.Major, in.Minor = ParseRelease(in.Release)
	in.Config, in.ConfigAt = readConfig(in.Release)
	in.Emulated = detectEmulation()
	return in
}

var relRe = regexp.MustCompile(`^(\d+)\.(\d+)`)

// ParseRelease returns major and minor of a release such as "6.12.117+deb13-arm64".
func ParseRelease(r string) (int, int) {
	m := relRe.FindStringSubmatch(r)
	if m == nil {
		return 0, 0
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[2])
	return a, b
}

// AtLeast reports whether the kernel is at least major.minor.
func (in *Info) AtLeast(major, minor int) bool {
	return in.Major > major || (in.Major == major && in.Minor >= minor)
}

// ConfigValue returns "y", "m", a value, "n" (known unset) or "?" (no config).
func (in *Info) ConfigValue(key string) string {
	if in.Config == nil {
		return "?"
	}
	if v, ok := in.Config[key]; ok {
		return v
	}
	return "n"
}

func readConfig(release string) (map[string]string, string) {
	var r io.Reader
	src := "/proc/config.gz"
	if f, err := os.Open(src); err == nil {
		defer f.Close()
		if zr, err := gzip.NewReader(f); err == nil {
			r = zr
		}
	}
	if r == nil {
		src = "/boot/config-" + release
		f, err := os.Open(src)
		if err != nil {
			return nil, ""
		}
		defer f.Close()
		r = f
	}
	return ParseConfig(r), src
}

// ParseConfig reads a kernel .config.
func ParseConfig(r io.Reader) map[string]string {
	cfg := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l := sc.Text()
		if k, v, ok := strings.Cut(l, "="); ok && strings.HasPrefix(k, "CONFIG_") {
			cfg[k] = strings.Trim(v, `"`)
		}
	}
	return cfg
}

// IcountParam is the kernel parameter ftprobe vm --accel icount adds: the
// guest clock counts executed instructions (QEMU -icount shift=0).
const IcountParam = "ftprobe.clock=icount"

func detectEmulation() string {
	if c, _ := os.ReadFile("/proc/cmdline"); strings.Contains(string(c), IcountParam) {
		return EmulatedIcount
	}
	b, _ := os.ReadFile("/proc/cpuinfo")
	s := string(b)
	// QEMU's TCG sets the hypervisor CPUID bit too; its CPU model says TCG.
	if strings.Contains(s, "QEMU TCG CPU") {
		return "QEMU TCG"
	}
	if v, _ := os.ReadFile("/sys/class/dmi/id/sys_vendor"); strings.Contains(string(v), "QEMU") {
		if strings.Contains(s, "hypervisor") {
			return "QEMU (KVM)"
		}
		return "QEMU TCG"
	}
	if v, _ := os.ReadFile("/proc/device-tree/compatible"); strings.Contains(string(v), "linux,dummy-virt") {
		return "QEMU TCG"
	}
	if strings.Contains(s, "hypervisor") {
		return "virtual machine"
	}
	return ""
}

// CPUModel returns the CPU model from /proc/cpuinfo: "model name" on x86,
// "CPU implementer 0x41 part 0xd0c" on arm64.
func CPUModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	var impl, part string
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "model name":
			return v
		case "CPU implementer":
			impl = v
		case "CPU part":
			part = v
		}
	}
	if part != "" {
		return "CPU implementer " + impl + " part " + part
	}
	return runtime.GOARCH
}

// Lockdown returns the active lockdown mode ("none", "integrity",
// "confidentiality") or "unknown".
func Lockdown() string {
	b, err := os.ReadFile("/sys/kernel/security/lockdown")
	if err != nil {
		return "unknown (securityfs not mounted or no lockdown LSM)"
	}
	m := regexp.MustCompile(`\[(\w+)\]`).FindStringSubmatch(string(b))
	if m == nil {
		return strings.TrimSpace(string(b))
	}
	return m[1]
}

// Capability bits (include/uapi/linux/capability.h).
const (
	CapSysAdmin = 21
	CapPerfmon  = 38
	CapBPF      = 39
	CapSyslog   = 34
)

// EffectiveCaps returns the effective capability mask from /proc/self/status.
func EffectiveCaps() uint64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			c, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return c
		}
	}
	return 0
}

// HasTracingCaps reports whether CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN)
// are effective.
func HasTracingCaps() bool {
	c := EffectiveCaps()
	has := func(b uint) bool { return c&(1<<b) != 0 }
	return has(CapSysAdmin) || (has(CapBPF) && has(CapPerfmon))
}

// CapNames lists the tracing-relevant effective capabilities.
func CapNames() []string {
	c := EffectiveCaps()
	var out []string
	for _, e := range []struct {
		bit  uint
		name string
	}{{CapSysAdmin, "CAP_SYS_ADMIN"}, {CapBPF, "CAP_BPF"}, {CapPerfmon, "CAP_PERFMON"}, {CapSyslog, "CAP_SYSLOG"}} {
		if c&(1<<e.bit) != 0 {
			out = append(out, e.name)
		}
	}
	return out
}

// TracefsMounted reports whether tracefs is mounted at /sys/kernel/tracing.
func TracefsMounted() bool {
	_, err := os.Stat("/sys/kernel/tracing/available_filter_functions")
	return err == nil
}

// DocumentedTrampolineLimits is what BPF trampolines take on this kernel by
// written rule, for when no trial load can be made (internal/trial): the
// argument slots (8 bytes each; a struct by value takes one per 8 bytes),
// the largest struct passed by value in bytes (0: none), and the rule's
// name for reason texts. Sources: x86-64 6 slots before 6.6 and 12 since
// (commit 473e3150e30a, "bpf, x86: allow function arguments up to 12 for
// TRACING"), structs up to 16 bytes since 6.1 (the generic limit in
// kernel/bpf/btf.c); arm64 8 slots (the argument registers) before the
// 2025 arm64 JIT work and 12 (MAX_BPF_FUNC_ARGS) after it, measured in the
// lab on 7.3.4 and assumed from 6.17 on, structs up to 16 bytes since 6.5
// ("bpf, arm64: Support struct arguments in the BPF trampoline"). Versions
// between those the lab measured are not verified.
func (in *Info) DocumentedTrampolineLimits() (slots int, maxStruct uint32, rule string) {
	switch in.Arch {
	case "amd64":
		slots = 6
		if in.AtLeast(6, 6) {
			slots = 12
		}
		if in.AtLeast(6, 1) {
			maxStruct = 16
		}
	case "arm64":
		slots = 8
		if in.AtLeast(6, 17) {
			slots = 12
		}
		if in.AtLeast(6, 5) {
			maxStruct = 16
		}
	default:
		slots = 6
	}
	return slots, maxStruct, fmt.Sprintf("the documented rule for %s %d.%d", in.Arch, in.Major, in.Minor)
}

func (in *Info) String() string {
	return fmt.Sprintf("%s %s", in.Release, in.Arch)
}

// EmulatedIcount is Info.Emulated under QEMU TCG with instruction
// counting (ftprobe vm --accel icount): 1 ns of guest time is one
// executed guest instruction.
const EmulatedIcount = "QEMU TCG icount"
