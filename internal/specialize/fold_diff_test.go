package specialize

import (
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/cilium/ebpf/asm"
)

// The differential test of the passes: random programs (ALU on
// immediates and registers, 64-bit immediates, stores and loads of every
// size at r10-relative, misaligned and overlapping slots, stores through
// a pointer into the stack, atomics, conditional jumps, bounded loops
// (a counter in r6-r9 and a back edge), BPF-to-BPF calls of a
// subprogram writing the caller's stack, every helper and kfunc
// bpf/trace.bpf.c calls, loads of ctx, of map values (looked up, .bss;
// their contents change from run to run) and of frozen .rodata in the
// shapes clang emits, calls of the xpred stub, CO-RE-relocated
// immediates, which the interpreter runs with another value than the
// compiled one, as cilium/ebpf's relocation at load would, and records
// as run) go through the passes: the reference is the program with its
// xpred stub replaced by predicates compiled by internal/expr (the
// subprogram); Simplify's rewrite of it, and InlineRodata, PatchPredicates
// splicing them in and Simplify (attach's order), must exit with the
// same r0, leave the same memory (stacks, map values) and make the same
// helper calls with the same arguments, on the same inputs
// (diff_machine_test.go). TestForFuncDiff checks ForFunc the same way.

var (
	diffVals  = []int64{0, 1, 2, 3, 7, 8, 16, 31, 32, 63, 64, 0x55, -1, -2, 0x7fffffff, -0x80000000}
	diffALU   = []asm.ALUOp{asm.Mov, asm.Add, asm.Sub, asm.And, asm.Or, asm.Xor, asm.LSh, asm.RSh}
	diffJumps = []asm.JumpOp{asm.JEq, asm.JNE, asm.JGT, asm.JGE, asm.JLT, asm.JLE, asm.JSGT, asm.JSGE, asm.JSLT, asm.JSLE, asm.JSet}
)

// stImm is `*(size *)(dst + off) = imm` (asm.StoreImm refuses DWord,
// which the kernel takes, imm sign-extended).
func stImm(dst asm.Register, off int16, imm int64, size asm.Size) asm.Instruction {
	return asm.Instruction{OpCode: asm.StoreImmOp(size), Dst: dst, Offset: off, Constant: imm}
}

// diffCheck runs orig and other in env and reports how they differ.
func diffCheck(orig, other asm.Instructions, env *diffEnv) error {
	a, err := diffRun(orig, env)
	if err != nil {
		return fmt.Errorf("original: %w (a generator or interpreter bug)", err)
	}
	b, err := diffRun(other, env)
	if err != nil {
		return fmt.Errorf("rewritten: %w", err)
	}
	return diffSame(a, b)
}

// diffSeed checks seed's program, its xpred stub replaced by predicates
// (the reference: what the program means), against Simplify's rewrite
// of it and against the passes as attach runs them (InlineRodata,
// PatchPredicates splicing the predicates in, Simplify), on three
// environments: random, small, and from the immediates. changed is how
// many instructions Simplify changed.
func diffSeed(seed int64) (changed int, err error) {
	r := rand.New(rand.NewSource(seed))
	orig := diffGen(r)
	rodata := make([]byte, 64)
	for i := range rodata {
		rodata[i] = byte(diffVal(r) >> (i % 4 * 8))
	}
	preds := diffPredicates()
	pr := preds[r.Intn(len(preds))]
	ref, err := diffPasses(orig, nil, pr, false)
	if err != nil {
		return 0, fmt.Errorf("seed %d: %w", seed, err)
	}
	simp, changed := Simplify(ref)
	full, err := diffPasses(orig, rodata, pr, true)
	if err != nil {
		return 0, fmt.Errorf("seed %d: %w", seed, err)
	}
	for k := range 3 {
		env := newDiffEnv(r, k, rodata)
		for _, v := range []struct {
			name  string
			insns asm.Instructions
		}{{"simplified", simp}, {"specialized", full}} {
			if err := diffCheck(ref, v.insns, env); err != nil {
				return changed, fmt.Errorf("seed %d, run %d, %s: %w\noriginal:\n%v\n%s:\n%v", seed, k, v.name, err, ref, v.name, v.insns)
			}
		}
	}
	return changed, nil
}

func diffVal(r *rand.Rand) int64 { return diffVals[r.Intn(len(diffVals))] }

// TestFoldDiff checks the programs of seeds 0..n-1 (FOLD_DIFF_N=n).
func TestFoldDiff(t *testing.T) {
	n := 8000
	if v, err := strconv.Atoi(os.Getenv("FOLD_DIFF_N")); err == nil {
		n = v
	} else if testing.Short() {
		n = 2000
	}
	var changed atomic.Int64
	t.Cleanup(func() { t.Logf("%d programs, 3 runs each, %d instructions changed", n, changed.Load()) })
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			t.Parallel()
			for seed := int64(w); seed < int64(n); seed += int64(workers) {
				c, err := diffSeed(seed)
				if changed.Add(int64(c)); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func FuzzFoldDiff(f *testing.F) {
	f.Add(int64(1))
	f.Fuzz(func(t *testing.T, seed int64) {
		if _, err := diffSeed(seed); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFoldDiffCatches: the check sees a jump folded on a spill a helper
// has since overwritten.
func TestFoldDiffCatches(t *testing.T) {
	orig := asm.Instructions{
		asm.Mov.Imm(asm.R0, 0).WithSymbol("prog"),
		stImm(asm.R10, -8, 5, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R10),
		asm.Add.Imm(asm.R1, -8),
		asm.Mov.Imm(asm.R2, 8),
		asm.FnProbeReadKernel.Call(),
		asm.LoadMem(asm.R6, asm.R10, -8, asm.DWord),
		{OpCode: asm.JEq.Op(asm.ImmSource), Dst: asm.R6, Constant: 5, Offset: 1}, // not taken
		asm.Mov.Imm(asm.R0, 1),
		asm.Return(),
	}
	wrong := slices.Clone(orig)
	wrong[7] = asm.Instruction{OpCode: asm.Ja.Op(asm.ImmSource), Offset: 1}
	env := newDiffEnv(rand.New(rand.NewSource(1)), 1, make([]byte, 64))
	if err := diffCheck(orig, orig, env); err != nil {
		t.Fatal(err)
	}
	if err := diffCheck(orig, wrong, env); err == nil {
		t.Fatal("a jump folded as taken on a stale spill went unseen")
	}
}

// TestFoldDiffCatchesCallee: the check sees a fill folded on a spill the
// BPF-to-BPF callee has since written through its pointer argument.
func TestFoldDiffCatchesCallee(t *testing.T) {
	orig := asm.Instructions{
		asm.Mov.Imm(asm.R0, 0).WithSymbol("prog"),
		stImm(asm.R10, -8, 5, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R10),
		asm.Add.Imm(asm.R1, -8),
		asm.Call.Label("sub"),
		asm.LoadMem(asm.R6, asm.R10, -8, asm.DWord),
		{OpCode: asm.JEq.Op(asm.ImmSource), Dst: asm.R6, Constant: 5, Offset: 1}, // not taken
		asm.Mov.Imm(asm.R0, 1),
		asm.Return(),
		asm.Mov.Reg(asm.R6, asm.R1).WithSymbol("sub"),
		stImm(asm.R6, 0, 7, asm.DWord),
		asm.Return(),
	}
	env := newDiffEnv(rand.New(rand.NewSource(1)), 1, make([]byte, 64))
	simp, _ := Simplify(orig)
	if err := diffCheck(orig, simp, env); err != nil {
		t.Fatal(err)
	}
	wrong := slices.Clone(orig)
	wrong[6] = asm.Instruction{OpCode: asm.Ja.Op(asm.ImmSource), Offset: 1}
	if err := diffCheck(orig, wrong, env); err == nil {
		t.Fatal("a jump folded on a spill the callee wrote went unseen")
	}
}
