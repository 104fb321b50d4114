package rings

import (
	"slices"
	"sync/atomic"
	"unsafe"
)

// Geometry is the layout of the areas map of ftprobe's trace programs
// (bpf/trace.bpf.c): an array of ElemSize-byte elements where the CPU
// with id c owns the Stride() elements from c*Stride(). The first holds
// the CPU's head (offset 0: bytes its programs reserved) and tail (offset
// 64: bytes the reader consumed); the others hold the records. A record at
// position pos of the CPU's stream starts in record element
// (pos/Chunk) % Chunks, at offset pos % Chunk, with an 8-byte word before
// it holding its length once it is committed (0 until then); it may run
// past Chunk into the element's slack.
type Geometry struct {
	CPUs     []int // the CPUs with records (none: no records)
	Chunk    int   // record bytes per element before its slack
	Chunks   int   // record elements per CPU, a power of two
	ElemSize int   // bytes per element: Chunk and the slack, 8-aligned
}

// Slots is the number of CPU ids the layout covers: the largest id + 1.
func (g Geometry) Slots() int {
	if len(g.CPUs) == 0 {
		return 0
	}
	return slices.Max(g.CPUs) + 1
}

// Stride is the elements per CPU: the control element and the records'.
func (g Geometry) Stride() int { return 1 + g.Chunks }

// Bytes is the size of the mapping of the whole array.
func (g Geometry) Bytes() int { return g.Slots() * g.Stride() * g.ElemSize }

// area is one CPU's part of the mapped array.
type area struct {
	g    Geometry
	mem  []byte // the CPU's Stride() elements
	head *uint64
	tail *uint64
}

func newArea(mem []byte, g Geometry, cpu int) area {
	off := cpu * g.Stride() * g.ElemSize
	a := area{g: g, mem: mem[off : off+g.Stride()*g.ElemSize]}
	a.head = (*uint64)(unsafe.Pointer(&a.mem[0]))
	a.tail = (*uint64)(unsafe.Pointer(&a.mem[64]))
	return a
}

// at returns the offset in mem of the length word of the record at pos.
func (a area) at(pos uint64) int {
	chunk := int(pos/uint64(a.g.Chunk)) & (a.g.Chunks - 1)
	return (1+chunk)*a.g.ElemSize + int(pos%uint64(a.g.Chunk))
}

// next returns the record committed at pos (nil when none is), and the
// position after it.
func (a area) next(pos uint64) ([]byte, uint64) {
	if pos >= atomic.LoadUint64(a.head) {
		return nil, pos
	}
	at := a.at(pos)
	n := atomic.LoadUint64((*uint64)(unsafe.Pointer(&a.mem[at])))
	if n == 0 || at+8+int(n) > len(a.mem) {
		return nil, pos // reserved, not committed yet
	}
	return a.mem[at+8 : at+8+int(n)], pos + 8 + (n+7)&^7
}

// consume zeroes the record at pos (length word and padding included),
// which fill has copied out; the space returns to the producers with the
// tail (publish).
func (a area) consume(pos uint64, n int) {
	at := a.at(pos)
	clear(a.mem[at : at+8+(n+7)&^7])
}

// publish gives the space before pos back to the producers.
func (a area) publish(pos uint64) { atomic.StoreUint64(a.tail, pos) }

// pending reports whether records were reserved past pos.
func (a area) pending(pos uint64) bool { return atomic.LoadUint64(a.head) > pos }
