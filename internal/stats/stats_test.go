package stats

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBucketBounds: every duration falls in its bucket's bounds, buckets
// are contiguous and each is at most 1/8 of its lower bound wide.
func TestBucketBounds(t *testing.T) {
	assert.Equal(t, 313, Buckets)
	for _, d := range []uint64{0, 1, 15, 16, 17, 31, 32, 100, 1000, 1023, 1024, 123456789, 1<<41 - 1} {
		lo, hi := Bounds(Bucket(d))
		assert.True(t, lo <= d && d < hi, "d=%d in [%d,%d)", d, lo, hi)
	}
	lo, hi := Bounds(Bucket(1 << 41))
	assert.EqualValues(t, uint64(1)<<41, lo)
	assert.EqualValues(t, 0, hi, "overflow bucket")
	for i := 1; i < Buckets-1; i++ {
		plo, phi := Bounds(i - 1)
		lo, hi := Bounds(i)
		assert.Equal(t, phi, lo, "bucket %d follows %d", i, i-1)
		_ = plo
		if i >= 16 {
			assert.LessOrEqual(t, (hi-lo)*8, lo, "bucket %d width", i)
		}
	}
}

// TestPercentileBound: against exact nearest-rank percentiles of random
// durations, the histogram's are within 6.25%.
func TestPercentileBound(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	var f Func
	var all []uint64
	for i := 0; i < 20000; i++ {
		d := uint64(r.ExpFloat64() * 50000)
		all = append(all, d)
		f.Add(d, true, "")
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for _, p := range []float64{50, 90, 99, 99.9} {
		rank := int(float64(len(all))*p/100 + 0.999999)
		exact := float64(all[rank-1])
		got := float64(f.Percentile(p))
		assert.InDelta(t, exact, got, exact/16+1, "p%v", p)
	}
	assert.Equal(t, all[len(all)-1], f.MaxNs)
	assert.LessOrEqual(t, f.Percentile(100), f.MaxNs)
}

func TestSummaryAndHist(t *testing.T) {
	tb := New()
	tb.Add("do_sys_openat2", 3000, "")
	tb.Add("do_sys_openat2", 5000, "ENOENT")
	tb.Add("vfs_read", 700, "")
	var b bytes.Buffer
	tb.WriteSummary(&b)
	// 3000 is in [2816, 3072): midpoint 2944; 5000 in [4608, 5120): 4864 capped by max 5000.
	assert.Contains(t, b.String(), "do_sys_openat2  2      1       4.0µs  2.9µs  4.9µs  4.9µs  5.0µs  ENOENT×1")
	b.Reset()
	tb.WriteHist(&b)
	assert.Contains(t, b.String(), "do_sys_openat2 (2 calls)")
	assert.Contains(t, b.String(), "[   2.0µs,    4.1µs)        1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|")
	j := tb.AppendJSON(nil, "stat", map[string]any{"interval_ns": 0})
	var doc struct {
		Type      string
		Functions []struct {
			Function string
			Calls    uint64
			Errnos   map[string]uint64
			P50Ns    uint64   `json:"p50_ns"`
			Log2Hist []uint64 `json:"log2_hist"`
		}
	}
	require.NoError(t, json.Unmarshal(j, &doc))
	assert.Equal(t, "stat", doc.Type)
	require.Len(t, doc.Functions, 2)
	assert.Equal(t, "do_sys_openat2", doc.Functions[0].Function)
	assert.EqualValues(t, 2, doc.Functions[0].Calls)
	assert.EqualValues(t, 1, doc.Functions[0].Errnos["ENOENT"])
	assert.EqualValues(t, 2944, doc.Functions[0].P50Ns)
	assert.Len(t, doc.Functions[0].Log2Hist, 14, "rows up to bits.Len64(5000)=13")
}

func TestSub(t *testing.T) {
	tb := New()
	tb.Add("f", 100, "")
	snap := New()
	snap.Merge(tb.Get("f"))
	tb.Add("f", 200, "EINVAL")
	d := tb.Sub(snap).Get("f")
	assert.EqualValues(t, 1, d.Calls)
	assert.EqualValues(t, 1, d.Errors)
	assert.EqualValues(t, 200, d.SumNs)
	assert.EqualValues(t, map[string]uint64{"EINVAL": 1}, d.Errnos)
}
