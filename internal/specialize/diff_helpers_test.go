package specialize

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf/asm"
)

// diffHelperArgs is every helper bpf/trace.bpf.c and the --filter
// predicates call (TestDiffHelpersCovered), with how many arguments it
// reads: a run's trace records those, so that a rewrite dropping the
// write of an argument a helper reads is seen, and only those (the
// others are free to change).
var diffHelperArgs = map[asm.BuiltinFunc]int{
	asm.FnGetCurrentPidTgid: 0, asm.FnKtimeGetNs: 0, asm.FnGetSmpProcessorId: 0, asm.FnGetCurrentTaskBtf: 0,
	asm.FnGetAttachCookie: 1, asm.FnGetFuncArgCnt: 1, asm.FnGetFuncArg: 3, asm.FnGetFuncRet: 2,
	asm.FnGetCurrentComm: 2, asm.FnGetStack: 4,
	asm.FnProbeReadKernel: 3, asm.FnProbeReadKernelStr: 3, asm.FnProbeReadUser: 3, asm.FnProbeReadUserStr: 3,
	asm.FnMapLookupElem: 2, asm.FnMapUpdateElem: 4, asm.FnMapDeleteElem: 2,
	asm.FnRingbufReserve: 3, asm.FnRingbufSubmit: 2, asm.FnRingbufDiscard: 2, asm.FnRingbufOutput: 4, asm.FnRingbufQuery: 2,
	asm.FnTaskStorageGet: 4, asm.FnTaskStorageDelete: 2,
}

// The kfuncs (their BTF IDs here): a stand-in writing through r1, and
// bpf/trace.bpf.c's two.
const (
	kfuncStandIn       = 1
	kfuncSessionReturn = 2 // bool bpf_session_is_return(ctx)
	kfuncSessionCookie = 3 // u64 *bpf_session_cookie(ctx)
)

const (
	diffEFAULT = ^uint64(13) // -14
	diffEINVAL = ^uint64(21) // -22
	diffE2BIG  = ^uint64(6)  // -7
	diffENOENT = ^uint64(1)  // -2
)

// call runs a helper: its effect on r0 and memory, r1-r5 clobbered with
// values that derive from the call count.
func (m *diffMachine) call(fn asm.BuiltinFunc) error {
	n, ok := diffHelperArgs[fn]
	if !ok {
		return fmt.Errorf("helper %v", fn)
	}
	m.calls++
	h := (m.calls*0x9e3779b97f4a7c15 ^ uint64(fn) ^ m.env.flags) * 0xbf58476d1ce4e5b9
	m.trace = append(m.trace, uint64(fn))
	m.trace = append(m.trace, m.reg[1:1+n]...)
	m.reg[0] = h
	if err := m.helper(fn, h); err != nil {
		return err
	}
	for r := 1; r <= 5; r++ {
		m.reg[r] = h + uint64(r)*0x1234567
	}
	return nil
}

// helper applies fn's effect.
func (m *diffMachine) helper(fn asm.BuiltinFunc, h uint64) error {
	r1, r2, r3, r4 := m.reg[1], m.reg[2], m.reg[3], m.reg[4]
	ctx := m.mem[diffRegion("ctx")]
	arg := func(i uint64) uint64 { return binary.LittleEndian.Uint64(ctx[8*i:]) }
	put := func(p, v uint64) bool {
		return m.write(p, 8, func(k int) byte { return byte(v >> (k * 8)) })
	}
	switch fn {
	case asm.FnGetSmpProcessorId:
		m.reg[0] = h & 3
	case asm.FnGetAttachCookie:
		m.reg[0] = m.env.flags >> 8
	case asm.FnGetFuncArgCnt:
		m.reg[0] = m.env.nargs
	case asm.FnGetFuncArg: // bpf_get_func_arg(ctx, n, *value)
		m.reg[0] = diffEINVAL
		if r2 < m.env.nargs && put(r3, arg(r2)) {
			m.reg[0] = 0
		}
	case asm.FnGetFuncRet: // bpf_get_func_ret(ctx, *value)
		m.reg[0] = 0
		put(r2, arg(m.env.nargs))
	case asm.FnGetCurrentComm, asm.FnGetStack: // (buf, size), (ctx, buf, size, flags)
		buf, size := r1, r2
		if fn == asm.FnGetStack {
			buf, size = r2, r3
		}
		m.reg[0] = diffEFAULT
		if m.write(buf, size, func(k int) byte { return byte(h>>(k%8*8)) ^ byte(k) }) {
			m.reg[0] = size
		}
	case asm.FnProbeReadKernel, asm.FnProbeReadUser, asm.FnProbeReadKernelStr, asm.FnProbeReadUserStr:
		m.probeRead(fn, h, r1, r2, r3)
	case asm.FnMapLookupElem, asm.FnMapUpdateElem, asm.FnMapDeleteElem:
		return m.mapHelper(fn, r1, r2, r3)
	case asm.FnRingbufReserve, asm.FnRingbufSubmit, asm.FnRingbufDiscard, asm.FnRingbufOutput, asm.FnRingbufQuery:
		return m.ringbuf(fn, h, r1, r2, r3)
	case asm.FnTaskStorageGet: // (map, task, value, flags): the value, or NULL
		m.reg[0] = 0
		if m.env.flags&4 != 0 || r4&1 != 0 {
			m.reg[0] = diffAddr("task")
		}
	case asm.FnTaskStorageDelete:
		m.reg[0] = 0
	}
	return nil
}

// probeRead runs bpf_probe_read_{kernel,user}(dst, n, src), which writes
// n bytes derived from h and src, and their _str forms, which write the
// string at src (src%13 bytes) and its NUL, at most n bytes, and return
// how many.
func (m *diffMachine) probeRead(fn asm.BuiltinFunc, h, dst, n, src uint64) {
	str := fn == asm.FnProbeReadKernelStr || fn == asm.FnProbeReadUserStr
	size, ret := n, uint64(0)
	if str {
		size = min(n, src%13+1)
		ret = size
	}
	m.reg[0] = diffEFAULT
	if m.write(dst, size, func(k int) byte {
		if str && uint64(k) == size-1 {
			return 0
		}
		return byte(h>>(k%8*8)) ^ byte(src) ^ byte(k) | 1
	}) {
		m.reg[0] = ret
	}
}

// key reads a u32 map key at p.
func (m *diffMachine) key(p uint64) (uint64, error) {
	v, err := m.load(p, 4)
	if err != nil {
		return 0, fmt.Errorf("map key: %w", err)
	}
	return v, nil
}

// mapHelper runs bpf_map_lookup_elem(map, key), bpf_map_update_elem(map,
// key, value, flags) and bpf_map_delete_elem(map, key) on the array vals:
// 4 values of 16 bytes.
func (m *diffMachine) mapHelper(fn asm.BuiltinFunc, mp, kp, vp uint64) error {
	if mp != diffHandle+uint64(diffRegion("vals")) {
		return fmt.Errorf("%v on %#x, not a map", fn, mp)
	}
	k, err := m.key(kp)
	if err != nil {
		return err
	}
	vals := diffAddr("vals")
	switch fn {
	case asm.FnMapLookupElem:
		m.reg[0] = 0
		if k < 4 {
			m.reg[0] = vals + 16*k
		}
	case asm.FnMapUpdateElem:
		m.reg[0] = diffE2BIG
		src, _ := m.at(vp, 16)
		if src == nil {
			return fmt.Errorf("map value at %#x, outside memory", vp)
		}
		if k < 4 {
			m.write(vals+16*k, 16, func(i int) byte { return src[i] })
			m.reg[0] = 0
		}
	case asm.FnMapDeleteElem:
		m.reg[0] = diffENOENT
		if k < 4 {
			m.write(vals+16*k, 16, func(int) byte { return 0 })
			m.reg[0] = 0
		}
	}
	return nil
}

// ringbuf runs the ringbuf helpers on one record of 64 bytes: reserve
// gives it (or NULL, when the run's flags say the ringbuf is full, or it
// is taken); submit records its contents in the trace, as output does
// the data it is given.
func (m *diffMachine) ringbuf(fn asm.BuiltinFunc, h, r1, r2, r3 uint64) error {
	rec := diffAddr("ringbuf")
	words := func(b []byte) {
		for i := 0; i+8 <= len(b); i += 8 {
			m.trace = append(m.trace, binary.LittleEndian.Uint64(b[i:]))
		}
	}
	switch fn {
	case asm.FnRingbufReserve: // (rb, size, flags)
		m.reg[0] = 0
		if r1 == diffHandle+uint64(diffRegion("ringbuf")) && r2 <= 64 && !m.rb && m.env.flags&(1<<(m.calls%16)) != 0 {
			m.reg[0], m.rb = rec, true
		}
	case asm.FnRingbufSubmit, asm.FnRingbufDiscard: // (data, flags)
		if !m.rb || r1 != rec {
			return fmt.Errorf("%v of %#x, not a reserved record", fn, r1)
		}
		if m.rb = false; fn == asm.FnRingbufSubmit {
			words(m.mem[diffRegion("ringbuf")])
		}
	case asm.FnRingbufOutput: // (rb, data, size, flags)
		b, _ := m.at(r2, int(r3))
		m.reg[0] = diffEFAULT
		if b != nil && r3 <= 64 {
			words(b)
			m.reg[0] = 0
		}
	case asm.FnRingbufQuery:
		m.reg[0] = h & 0xfff
	}
	return nil
}

// kfunc runs a kfunc: the stand-in (kfunc(ptr)) writes 8 bytes at r1;
// bpf_session_is_return gives the run's flag, bpf_session_cookie the
// cookie's address. r0-r5 derive from the call count.
func (m *diffMachine) kfunc(id int64) {
	m.calls++
	h := m.calls * 0xd6e8feb86659fd93
	m.trace, m.reg[0] = append(m.trace, 1<<32|uint64(id), m.reg[1]), h
	switch id {
	case kfuncStandIn:
		m.write(m.reg[1], 8, func(k int) byte { return byte(h >> (k * 8)) })
	case kfuncSessionReturn:
		m.reg[0] = m.env.flags >> 1 & 1
	case kfuncSessionCookie:
		m.reg[0] = diffAddr("cookie")
	}
	for r := 1; r <= 5; r++ {
		m.reg[r] = h + uint64(r)*0x7654321
	}
}
