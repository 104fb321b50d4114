package stats

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPercentilesExact(t *testing.T) {
	tb := New()
	for i := uint64(1); i <= 100; i++ {
		errno := ""
		if i%10 == 0 {
			errno = "ENOENT"
		}
		tb.Add("vfs_read", i*1000, errno)
	}
	f := tb.Funcs()[0]
	assert.EqualValues(t, 100, f.Calls)
	assert.EqualValues(t, 50000, f.Percentile(50))
	assert.EqualValues(t, 90000, f.Percentile(90))
	assert.EqualValues(t, 99000, f.Percentile(99))
	assert.EqualValues(t, 100000, f.Max)
	assert.EqualValues(t, 10, f.ErrorCount())
	assert.Equal(t, "ENOENT×10", f.ErrorList())
	var total uint64
	for _, c := range f.Hist {
		total += c
	}
	assert.EqualValues(t, 100, total, "histogram counts every call")
	// 1000..1023 ns land in [512ns, 1.0µs)... bucket of bits.Len64(1000)=10.
	assert.EqualValues(t, 1, f.Hist[10])
}

func TestSummaryAndHist(t *testing.T) {
	tb := New()
	tb.Add("do_sys_openat2", 3000, "")
	tb.Add("do_sys_openat2", 5000, "ENOENT")
	tb.Add("vfs_read", 700, "")
	var b bytes.Buffer
	tb.WriteSummary(&b)
	assert.Contains(t, b.String(), "do_sys_openat2  2      1       3.0µs  5.0µs  5.0µs  5.0µs  ENOENT×1")
	b.Reset()
	tb.WriteHist(&b)
	assert.Contains(t, b.String(), "do_sys_openat2 (2 calls)")
	assert.Contains(t, b.String(), "[   2.0µs,    4.1µs)        1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|")
}
