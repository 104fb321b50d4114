package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/osthread"
)

// TestParseThreads: counts sorted and once, 1 always in, all = the CPUs
// given; 0, a count above them and a word are errors naming the value.
func TestParseThreads(t *testing.T) {
	for in, want := range map[string][]int{"1": {1}, "4,2": {1, 2, 4}, "all": {1, 8}, "2, 8,all,2": {1, 2, 8}, "1,1": {1}} {
		got, err := ParseThreads(in, 8)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"0", "9", "1,-2", "two", "", "1,,2"} {
		_, err := ParseThreads(in, 8)
		require.Error(t, err, in)
		assert.EqualError(t, err, `--threads "`+in+`": want comma-separated thread counts from 1 to 8 (the CPUs this process may run on) or all`)
	}
}

// TestTeamRun: the team's threads are pinned to the process's first
// CPUs, one each, and run returns a span holding every thread's own
// time, and the first error.
func TestTeamRun(t *testing.T) {
	n := min(2, runtime.NumCPU())
	tm, err := newTeam(n)
	require.NoError(t, err)
	defer tm.Close()
	cpus, err := osthread.CPUs()
	require.NoError(t, err)
	var mu sync.Mutex
	seen := map[int]int{}   // tid -> its one CPU
	var own []time.Duration // each thread's own time
	d, err := tm.run(n, func() (time.Duration, error) {
		start := time.Now()
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() != 1 {
			return 0, errors.New("not pinned to one CPU")
		}
		time.Sleep(time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cpus {
			if set.IsSet(c) {
				seen[unix.Gettid()] = c
			}
		}
		own = append(own, time.Since(start))
		return own[len(own)-1], nil
	})
	require.NoError(t, err)
	want := map[int]int{}
	for k, th := range tm {
		want[int(th.TID)] = cpus[k]
	}
	assert.Equal(t, want, seen)
	require.Len(t, own, n)
	for _, o := range own {
		assert.GreaterOrEqual(t, d, o, "the span holds each thread's time")
	}
	var calls atomic.Int64
	_, err = tm.run(n, func() (time.Duration, error) { calls.Add(1); return 0, errors.New("boom") })
	assert.EqualError(t, err, "boom")
	assert.EqualValues(t, n, calls.Load())
	_, err = newTeam(runtime.NumCPU() + 1)
	assert.ErrorIs(t, err, ErrBadInput)
}

// threadsReport is a hit report of one body and two modes at 1 and 4
// threads under QEMU icount, built the way hitRun does: hitBody.add per
// run, then finish.
func threadsReport() *Report {
	kin := &kfeat.Info{Emulated: kfeat.EmulatedIcount}
	r := &Report{Schema: SchemaID, Header: Header{Release: "7.3.4", Arch: "amd64", CPUs: 4, Runs: 2}}
	ms := func(ns float64) time.Duration { return time.Duration(ns * 1000) } // per call, 1000 calls
	body := func(threads int, runs [][3]float64) {
		b := &hitBody{body: BodyTrace, threads: threads, modes: []string{ModeFentryFexit, ModeFSession}, share: clockShare(kin, threads),
			rows: map[string]*HitRow{}, samples: map[string][]float64{}, over: map[string][]float64{}, ratios: map[string][]float64{}}
		row := func(m string) *HitRow {
			return &HitRow{Trigger: TriggerKernel, Body: BodyTrace, Mode: m, Supported: true, Calls: 1000, Threads: threads, Reader: "after"}
		}
		b.base = row(ModeBaseline)
		for _, m := range b.modes {
			b.rows[m] = row(m)
		}
		for _, run := range runs { // baseline, fentry+fexit, fsession ns per call
			b.add(ModeFentryFexit, ms(run[0]), ms(run[1]))
			b.add(ModeFSession, ms(run[0]), ms(run[2]))
		}
		b.finish(r)
	}
	body(1, [][3]float64{{100, 300, 250}, {100, 320, 260}})
	body(4, [][3]float64{{400, 2000, 1200}, {440, 2440, 1440}})
	r.setRatios()
	return r
}

// TestThreadsRows: at several threads under QEMU icount ns over baseline
// is the difference to the baseline of the same threads over the
// threads; x 1 thread divides it by the one-thread row's; text, JSON and
// the plot show them; on parallel CPUs the difference is one thread's.
func TestThreadsRows(t *testing.T) {
	r := threadsReport()
	require.Len(t, r.Hit, 6)
	one, four := r.Hit[1], r.Hit[4] // fentry+fexit
	assert.Equal(t, 1, one.Threads)
	assert.Equal(t, []float64{200, 220}, one.OverheadNs.Samples, "one thread: the difference, as before")
	assert.InDelta(t, 3.1, one.RatioBaseline, 1e-9)
	assert.Zero(t, one.RatioOneThread)
	assert.Equal(t, 4, four.Threads)
	assert.Equal(t, []float64{400, 500}, four.OverheadNs.Samples, "(2000-400)/4, (2440-440)/4")
	assert.InDelta(t, (5+2440.0/440)/2, four.RatioBaseline, 1e-9)
	assert.InDelta(t, 450.0/210, four.RatioOneThread, 1e-9)
	fs4 := r.Hit[5]
	assert.Equal(t, []float64{200, 250}, fs4.OverheadNs.Samples)
	assert.InDelta(t, 225.0/155, fs4.RatioOneThread, 1e-9)
	assert.InDelta(t, 225.0/450, fs4.RatioFentry, 1e-9, "x ref within the 4-thread rows")
	assert.Equal(t, 420.0, r.Hit[3].NsPerHit.Median, "the 4-thread baseline row")
	assert.Equal(t, 4.0, clockShare(&kfeat.Info{Emulated: kfeat.EmulatedIcount}, 4))
	assert.Equal(t, 1.0, clockShare(&kfeat.Info{Emulated: "QEMU TCG"}, 4), "plain TCG: vCPUs on host threads")
	assert.Equal(t, 1.0, clockShare(&kfeat.Info{}, 4), "hardware: CPUs in parallel")

	var out bytes.Buffer
	r.WriteText(&out)
	s := out.String()
	assert.Contains(t, s, "x 1 thread = ns over base over the 1-thread row's")
	assert.Regexp(t, `trigger\s+body\s+mode\s+threads\s+Mhits/s\s+ns/hit\s+\[min\.\.max\]\s+ns over base\s+x base\s+x ref\s+x 1 thread\s+x empty\s+misses\s+drops`, s)
	assert.Regexp(t, `kernel\s+trace\s+fentry\+fexit\s+4\s+0\.450\s+2220\.0\s+\[2000\.0\.\.2440\.0\]\s+450\.0\s+5\.27\s+1\.00\s+2\.14\s+0\s+0\n`, s)
	assert.Regexp(t, `kernel\s+trace\s+fentry\+fexit\s+1\s+3\.226\s+310\.0\s+\[300\.0\.\.320\.0\]\s+210\.0\s+3\.10\s+1\.00\s+0\s+0\n`, s)

	var js bytes.Buffer
	require.NoError(t, r.WriteJSON(&js))
	var doc struct {
		Hit []map[string]any `json:"hit_cost"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &doc))
	assert.EqualValues(t, 4, doc.Hit[4]["threads"])
	assert.InDelta(t, (5+2440.0/440)/2, doc.Hit[4]["ratio_to_baseline"], 1e-9)
	assert.InDelta(t, 450.0/210, doc.Hit[4]["ratio_to_one_thread"], 1e-9)
	assert.NotContains(t, doc.Hit[1], "ratio_to_one_thread")

	svg := filepath.Join(t.TempDir(), "p.svg")
	require.NoError(t, r.Plot(svg))
	b, err := os.ReadFile(svg)
	require.NoError(t, err)
	assert.Contains(t, string(b), "hit cost against threads calling at once")
	assert.Contains(t, string(b), "trace fsession")

	var md bytes.Buffer
	require.NoError(t, r.WriteMarkdown(&md))
	assert.Contains(t, md.String(), "| 210 |", "Markdown: the one-thread rows")
	assert.NotContains(t, md.String(), "450")

	m, err := Merge([]string{"r.json"}, []*Report{r})
	require.NoError(t, err)
	require.Len(t, m.Hit, 2, "merged: the one-thread rows")
	assert.Equal(t, 210.0, m.Hit[0].Cells[0].OverheadNs.Value)
}

// TestOneThreadText: a report without several threads keeps its table:
// no threads, x base or x 1 thread column, no threads legend, and no
// threads panel in the plot.
func TestOneThreadText(t *testing.T) {
	r := threadsReport()
	r.Hit = r.Hit[:3]
	var out bytes.Buffer
	r.WriteText(&out)
	s := out.String()
	assert.NotContains(t, s, "threads")
	assert.NotContains(t, s, "x base")
	assert.Regexp(t, `mode\s+Mhits/s\s+ns/hit\s+\[min\.\.max\]\s+ns over base\s+x ref\s+x empty\s+misses\s+drops`, s)
	p, err := r.threadsPlot()
	require.NoError(t, err)
	assert.Nil(t, p)
}
