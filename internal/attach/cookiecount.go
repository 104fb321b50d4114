package attach

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// CookieCounter is a kprobe.multi program that counts the calls of one
// thread to each function it is linked to, by the function's attach
// cookie (0 .. n-1; LinkKprobeMulti with cookies), in a mmapable array
// read without a syscall (internal/selfreach). Close unloads it.
type CookieCounter struct {
	Prog *ebpf.Program
	m    *ebpf.Map
	mem  *ebpf.Memory
	n    int
}

// NewCookieCounter loads a CookieCounter of n counters for thread tid.
// Minimum kernel 5.18 (kprobe.multi), 5.5 for the mmapable array.
func NewCookieCounter(n int, tid uint32) (*CookieCounter, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "ftp_cookiecount", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: uint32(n), Flags: unix.BPF_F_MMAPABLE})
	if err != nil {
		return nil, fmt.Errorf("counting map: %w", err)
	}
	mem, err := m.Memory()
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("counting map: %w", err)
	}
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnGetCurrentPidTgid.Call(),
		asm.Mov.Reg32(asm.R0, asm.R0), // the tid: the low 32 bits
		asm.JNE.Imm(asm.R0, int32(tid), "out"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.FnGetAttachCookie.Call(),
		asm.StoreMem(asm.RFP, -4, asm.R0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	}
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "ftp_cookiecount", Type: ebpf.Kprobe, AttachType: ebpf.AttachTraceKprobeMulti, License: "GPL", Instructions: insns})
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("counting kprobe.multi program: %w", err)
	}
	return &CookieCounter{Prog: p, m: m, mem: mem, n: n}, nil
}

// Read returns the counts now, by cookie.
func (c *CookieCounter) Read() ([]uint64, error) {
	b := make([]byte, 8*c.n)
	if _, err := c.mem.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("counting map: %w", err)
	}
	out := make([]uint64, c.n)
	for i := range out {
		out[i] = binary.NativeEndian.Uint64(b[8*i:])
	}
	return out, nil
}

// Close unloads the program and its map.
func (c *CookieCounter) Close() {
	c.Prog.Close()
	c.m.Close()
}
