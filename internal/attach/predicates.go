package attach

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/expr"
)

// inlinePredicates splices body (expr.Predicates.Inline) in place of
// every call of bpf/trace.bpf.c's xpred in spec's programs and drops the
// stub, then uncalled (the verifier refuses unreachable code). The call's
// line info goes to the body's first instruction; every jump of the
// program that spans a call site is lengthened by the body's size.
// Errors: a jump that no longer fits its offset; spec is then left as it
// was (every program is rewritten only once all of them could be).
func inlinePredicates(spec *ebpf.CollectionSpec, body asm.Instructions) error {
	bodyRaw := expr.RawSlots(body)
	done := map[*ebpf.ProgramSpec]asm.Instructions{}
	for name, ps := range spec.Programs {
		old := ps.Instructions
		start, end := predicateStub(old)
		if start < 0 {
			continue
		}
		isCall := func(ins *asm.Instruction) bool {
			return ins.IsFunctionCall() && ins.Reference() == expr.PredicateFunc
		}
		// Raw slot of each old instruction, and where it moves.
		oldRaw := make([]int, len(old)+1)
		newRaw := make([]int, len(old)+1)
		for i := range old {
			n := int(old[i].Size() / asm.InstructionSize)
			oldRaw[i+1] = oldRaw[i] + n
			switch {
			case i >= start && i < end:
				n = 0 // the stub, dropped
			case isCall(&old[i]):
				n = bodyRaw
			}
			newRaw[i+1] = newRaw[i] + n
		}
		at := make(map[int]int, len(old)) // old raw slot → new raw slot
		for i := range old {
			at[oldRaw[i]] = newRaw[i]
		}
		at[oldRaw[len(old)]] = newRaw[len(old)]
		insns := make(asm.Instructions, 0, len(old)+bodyRaw*4)
		for i := range old {
			ins := old[i]
			switch {
			case i >= start && i < end:
				continue
			case isCall(&ins):
				b := make(asm.Instructions, len(body))
				copy(b, body)
				// The call's source line (and symbol, were it a
				// function's first instruction), not its target.
				b[0] = b[0].WithMetadata(ins.Metadata).WithReference("")
				insns = append(insns, b...)
				continue
			}
			if op := ins.OpCode; op.Class().IsJump() && op.JumpOp() != asm.Call && op.JumpOp() != asm.Exit {
				to, ok := at[oldRaw[i]+1+jumpOffset(ins)]
				if !ok {
					return fmt.Errorf("attach: program %s: inlining the --filter predicates: jump at %d into an instruction", name, i)
				}
				noff := to - newRaw[i] - 1
				if op.Class() == asm.Jump32Class && op.JumpOp() == asm.Ja {
					ins.Constant = int64(noff) // gotol
				} else if noff < math.MinInt16 || noff > math.MaxInt16 {
					return fmt.Errorf("attach: program %s: inlining the --filter predicates: a jump of %d instructions", name, noff)
				} else {
					ins.Offset = int16(noff)
				}
			}
			insns = append(insns, ins)
		}
		if len(insns) > 1_000_000 {
			return fmt.Errorf("attach: program %s with the --filter predicates: %d instructions", name, len(insns))
		}
		done[ps] = insns
	}
	for ps, insns := range done {
		ps.Instructions = insns
	}
	return nil
}

// predicateStub returns where bpf/trace.bpf.c's xpred stub lies in a
// program's instructions: from its symbol to the next function's (or the
// end); start -1 when the program has none.
func predicateStub(insns asm.Instructions) (start, end int) {
	start = slices.IndexFunc(insns, func(ins asm.Instruction) bool { return ins.Symbol() == expr.PredicateFunc })
	if start < 0 {
		return -1, -1
	}
	end = len(insns)
	for i := start + 1; i < end; i++ {
		if insns[i].Symbol() != "" {
			return start, i
		}
	}
	return start, end
}

// FaultCounterOf is where the compiled --filter predicates of spec (the
// trace object, bpfobj.LoadTrace) count a faulted read: this CPU's
// FTP_STAT_X_FAULT counter in ftp_stats (statsRows' layout).
func FaultCounterOf(spec *ebpf.CollectionSpec) (expr.FaultCounter, error) {
	v := spec.Variables["ftp_stats"]
	var rows statsRows
	if v == nil || int(v.Size()) != int(unsafe.Sizeof(rows)) {
		return expr.FaultCounter{}, errors.New("BPF object lacks ftp_stats of the expected size")
	}
	return expr.FaultCounter{Map: v.SectionName, Off: v.Offset + uint32(bpfobj.TraceFtpStatFTP_STAT_X_FAULT)*8,
		Rows: uint32(len(rows)), RowBytes: uint32(len(rows[0]) * 8)}, nil
}

// patchPredicates puts the compiled --filter predicates (pr) in place of
// the body of bpf/trace.bpf.c's xpred stub in every program of spec that
// calls it. The first instruction keeps the stub's metadata: its symbol
// (the BPF-to-BPF call's target), BTF function and line info. pr nil: the
// stub stays (the programs then never call it: no function has a
// predicate number).
func patchPredicates(spec *ebpf.CollectionSpec, pr *expr.Predicates) error {
	if pr == nil {
		return nil
	}
	if pr.Inline != nil {
		if err := inlinePredicates(spec, pr.Inline); err == nil {
			return nil
		}
		// A jump that no longer fits (inlinePredicates changed
		// nothing): the subprogram, called.
	}
	for name, ps := range spec.Programs {
		start, end := predicateStub(ps.Instructions)
		if start < 0 {
			continue
		}
		body := make(asm.Instructions, len(pr.Insns))
		copy(body, pr.Insns)
		body[0] = body[0].WithMetadata(ps.Instructions[start].Metadata)
		insns := make(asm.Instructions, 0, len(ps.Instructions)-(end-start)+len(body))
		insns = append(insns, ps.Instructions[:start]...)
		insns = append(insns, body...)
		insns = append(insns, ps.Instructions[end:]...)
		ps.Instructions = insns
		if len(insns) > 1_000_000 {
			return fmt.Errorf("attach: program %s with the --filter predicates: %d instructions", name, len(insns))
		}
	}
	return nil
}
