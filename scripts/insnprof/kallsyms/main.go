// Command kallsyms runs /bin/ftprobe with its arguments in a lab guest and
// records where the kernel put each BPF program's JIT image while it runs
// (every program seen, polled every 20 ms of guest time), for
// scripts/insnprof/report.py: BPF programs get their addresses at load and
// lose them at unload. After ftprobe's own output it prints a
// "== kallsyms" line, the guest's /proc/kallsyms, and per program
//
//	ADDR t bpf_prog_TAG_NAME [bpf]   (kallsyms form: one per JIT function)
//	jitline ADDR LINE FILE:LINENO     (the program's BTF line info, JIT addresses)
//	jited ADDR HEX                   (with INSNPROF_JITED=1: each JIT function's code,
//	                                  for annotate.py; programs loaded without BTF
//	                                  have no line info)
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cilium/ebpf"
)

type prog struct {
	name  string
	tag   string
	addrs []uintptr
	lines []string
	jited []string
}

func snapshot(seen map[ebpf.ProgramID]*prog) {
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			return
		}
		id = next
		if seen[id] != nil {
			continue
		}
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue
		}
		info, err := p.Info()
		if err != nil {
			p.Close()
			continue
		}
		pr := &prog{name: info.Name, tag: info.Tag}
		pr.addrs, _ = info.JitedKsymAddrs()
		jl, _ := info.JitedLineInfos()
		li, err := info.LineInfos()
		if err == nil {
			for i, l := range li {
				if i >= len(jl) {
					break
				}
				if bl := l.Line; bl != nil {
					pr.lines = append(pr.lines, fmt.Sprintf("jitline %x %s:%d %s", jl[i], bl.FileName(), bl.LineNumber(), strings.TrimSpace(bl.Line())))
				}
			}
		}
		if os.Getenv("INSNPROF_JITED") != "" {
			code, _ := info.JitedInsns()
			lens, _ := info.JitedFuncLens()
			off := uint32(0)
			for i, a := range pr.addrs {
				if i >= len(lens) || off+lens[i] > uint32(len(code)) {
					break
				}
				pr.jited = append(pr.jited, fmt.Sprintf("jited %x %x", a, code[off:off+lens[i]]))
				off += lens[i]
			}
		}
		seen[id] = pr
		p.Close()
	}
}

func main() {
	all, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		fmt.Fprintln(os.Stderr, "kallsyms:", err)
		os.Exit(1)
	}
	seen := map[ebpf.ProgramID]*prog{}
	snapshot(seen)
	for id := range seen {
		seen[id].name = "" // loaded before ftprobe: not ours
	}
	cmd := exec.Command("/bin/ftprobe", os.Args[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "kallsyms:", err)
		os.Exit(1)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
loop:
	for {
		select {
		case werr = <-done:
			break loop
		case <-time.After(20 * time.Millisecond):
			snapshot(seen)
		}
	}
	fmt.Println("== kallsyms")
	// Text symbols only (and _etext, where the kernel's text ends): the
	// serial console is slow under TCG.
	for _, l := range strings.Split(string(all), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && (strings.ContainsAny(f[1], "tTwW") || f[2] == "_etext") {
			fmt.Println(l)
		}
	}
	for _, p := range seen {
		if p.name == "" {
			continue
		}
		for _, a := range p.addrs {
			fmt.Printf("%016x t bpf_prog_%s_%s\t[bpf]\n", a, p.tag, p.name)
		}
		for _, l := range p.lines {
			fmt.Println(l)
		}
		for _, l := range p.jited {
			fmt.Println(l)
		}
	}
	if werr != nil {
		os.Exit(1)
	}
}
