package trace

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ftprobe/ftprobe/internal/attach"
)

// TestDefaultRingbufSize: a share per CPU between the floor and the cap,
// a power of two the kernel takes.
func TestDefaultRingbufSize(t *testing.T) {
	for ncpu, want := range map[int]uint32{0: 32 << 20, 1: 32 << 20, 2: 32 << 20, 3: 32 << 20, 4: 32 << 20, 5: 64 << 20, 16: 128 << 20, 32: 256 << 20, 1024: 256 << 20} {
		got := DefaultRingbufSize(ncpu)
		assert.Equal(t, want, got, "%d CPUs", ncpu)
		assert.NoError(t, attach.ValidateRingbufSize(uint64(got)))
	}
	assert.GreaterOrEqual(t, onlineCPUs(), 1)
}

// TestDropsAdvice: only ringbuf drops get the advice.
func TestDropsAdvice(t *testing.T) {
	assert.Empty(t, dropsAdvice(attach.Losses{RecursionMiss: 3}, 4<<20))
	assert.Contains(t, dropsAdvice(attach.Losses{RingbufDrops: 1}, 4<<20), "the 4 MiB ringbuf filled")
	assert.Contains(t, dropsAdvice(attach.Losses{RingbufDrops: 1}, 0), "the ringbuf filled")
}
