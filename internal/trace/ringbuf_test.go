package trace

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ftprobe/ftprobe/internal/attach"
)

// TestDefaultRingbufSize: each CPU's share of the total, between the
// floor and the cap, a power of two the kernel takes.
func TestDefaultRingbufSize(t *testing.T) {
	for ncpu, want := range map[int]uint32{0: 32 << 20, 1: 32 << 20, 2: 32 << 20, 8: 32 << 20, 9: 16 << 20, 16: 16 << 20, 64: 4 << 20, 192: 1 << 20, 256: 1 << 20, 1024: 1 << 20} {
		got := DefaultRingbufSize(ncpu)
		assert.Equal(t, want, got, "%d CPUs", ncpu)
		assert.NoError(t, attach.ValidateRingbufSize(uint64(got), ncpu))
	}
	assert.GreaterOrEqual(t, onlineCPUs(), 1)
}

// TestDropsAdvice: only ringbuf drops get the advice.
func TestDropsAdvice(t *testing.T) {
	assert.Empty(t, dropsAdvice(attach.Losses{RecursionMiss: 3}, 4<<20))
	assert.Contains(t, dropsAdvice(attach.Losses{RingbufDrops: 1}, 4<<20), "the 4 MiB record buffer of a CPU filled")
	assert.Contains(t, dropsAdvice(attach.Losses{RingbufDrops: 1}, 0), "the record buffer of a CPU filled")
}

// TestDropsByCPU: the advice names the CPUs whose ringbuf filled.
func TestDropsByCPU(t *testing.T) {
	l := attach.Losses{RingbufDrops: 7, RingbufDropsByCPU: map[int]uint64{3: 2, 0: 5}}
	assert.Contains(t, dropsAdvice(l, 1<<20), "(7 ringbuf drops; CPU 0: 5, CPU 3: 2)")
}
