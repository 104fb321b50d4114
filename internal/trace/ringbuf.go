package trace

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/ftprobe/ftprobe/internal/attach"
)

// The default ringbuf size (--buffer-size unset): RingbufPerCPU for each
// online CPU, at least RingbufMin and at most RingbufMax, a power of two.
// Every CPU can fill the ringbuf while one reader empties it. 16 MiB was
// the smallest that delivered every event of trace vfs_read (fentry+fexit
// and fsession, text and JSON) during 2x100k one-byte reads in the 2-CPU
// lab VM under instruction counting; without instruction counting, on a
// loaded host, the amd64 lab VM dropped 3.7% at 16 MiB, so the floor is
// twice that.
const (
	RingbufPerCPU = 8 << 20
	RingbufMin    = 32 << 20
	RingbufMax    = 256 << 20
)

// DefaultRingbufSize is the ringbuf size for ncpu online CPUs: the rule
// of RingbufPerCPU, rounded up to a power of two.
func DefaultRingbufSize(ncpu int) uint32 {
	n := uint64(max(ncpu, 1)) * RingbufPerCPU
	n = min(max(n, RingbufMin), RingbufMax)
	p := uint64(RingbufMin)
	for p < n {
		p <<= 1
	}
	return uint32(p)
}

// onlineCPUs counts the CPUs in /sys/devices/system/cpu/online (ranges
// like "0-3,6"), or those this process may run on when it cannot be read.
func onlineCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for _, r := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, found := strings.Cut(r, "-")
		a, err1 := strconv.Atoi(lo)
		z := a
		var err2 error
		if found {
			z, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || z < a {
			return runtime.NumCPU()
		}
		n += z - a + 1
	}
	return max(n, 1)
}

// sizeText is n bytes in MiB or KiB when it is a whole number of them.
func sizeText(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// dropsAdvice says, when the kernel dropped records because the ringbuf
// of size bytes was full, what keeps the reader up; "" without drops.
func dropsAdvice(l attach.Losses, size uint32) string {
	if l.RingbufDrops == 0 {
		return ""
	}
	ring := "ringbuf"
	if size > 0 {
		ring = sizeText(uint64(size)) + " ringbuf"
	}
	return fmt.Sprintf("ftprobe: the %s filled faster than ftprobe read it (%d ringbuf drops): "+
		"a larger --buffer-size holds longer bursts (up to %s); --min-duration or --errors send one record per kept call, "+
		"at its exit; stat counts in the kernel and sends none", ring, l.RingbufDrops, sizeText(attach.MaxRingbufSize))
}
