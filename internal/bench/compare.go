package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/ftprobe/ftprobe/internal/attach"
	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/events"
	"github.com/ftprobe/ftprobe/internal/expr"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/osthread"
	"github.com/ftprobe/ftprobe/internal/plural"
	"github.com/ftprobe/ftprobe/internal/rings"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Config of a compare run.
type Config struct {
	Triggers []string // kernel, syscall
	Bodies   []string // empty, trace, exit-only, agg, filtered, predicate, window, timed
	// Modes restricts the hit-cost rows to these modes (HitModes and
	// TraceModes names; empty = all).
	Modes        []string
	Runs         int      // measured repetitions (after one warm-up)
	Calls        int      // calls per measurement (kernel trigger: rounded to batches)
	SyscallCalls int      // calls per measurement for the syscall trigger
	Batch        int      // kernel trigger: calls per BPF_PROG_TEST_RUN
	AttachN      []int    // attach/detach scenario sizes
	CrowdK       []int    // crowded-ftrace scenario sizes
	CrowdBy      []string // crowd kinds: CrowdByFentry, CrowdByKprobeMulti (default both)
	RingbufSize  uint32   // streaming and trace bodies
	// ReaderDuring drains the record buffers of the trace bodies while the calls
	// are timed (the reader's own work then counts wherever it shares a
	// CPU with the measured thread: always under single-threaded TCG).
	// Default (false): the reader drains after each timed run, from a
	// buffers sized to hold the whole run (HitRingbufSize), so the hit cost
	// is what the traced thread pays; drops are counted either way.
	ReaderDuring bool
	StreamCalls  int // calls in the streaming scenario
	// Threads are the hit scenario's thread counts (ParseThreads: sorted,
	// holding 1; empty = 1). Beyond one, each count N is measured by N
	// threads pinned to N CPUs calling the target at once, every thread
	// making the calls of a run; see HitRow.Threads for the figures.
	Threads   []int
	Scenarios []string // hit, attach, crowd, stream
	// Target replaces the syscall trigger's probed function (default: the
	// getppid(2) handler). It must run once per getppid(2) call for the
	// counts to be exact; any difference is reported as misses.
	Target  string
	Version string // ftprobe version and revision, recorded in the header
	// NoSpecialize loads the trace bodies' programs as compiled
	// (attach.Options.NoSpecialize; FTPROBE_SPECIALIZE=off).
	NoSpecialize bool
	// GeneralObject loads the trace bodies from the general trace object
	// whatever their settings (attach.Options.GeneralObject;
	// FTPROBE_OBJECT=general).
	GeneralObject bool
	Progress      func(msg string)
}

// ValidateTarget checks cfg.Target before anything is attached: it must
// be a function of this kernel that both fentry and kprobe.multi can
// trace. Errors wrap ErrBadInput with the resolver's reason (unknown name
// with the closest ones, not in available_filter_functions, no BTF, ...).
func ValidateTarget(k *symbols.Kernel, target string) error {
	if target == "" {
		return nil
	}
	if k == nil {
		return fmt.Errorf("%w: --target %s: no symbol view of this kernel", ErrBadInput, target)
	}
	for _, mode := range []string{symbols.ModeFentryFexit, symbols.ModeKprobeMulti} {
		res, err := k.Resolve([]string{target}, nil, mode, 0)
		if err != nil {
			return fmt.Errorf("%w: --target: %w", ErrBadInput, err)
		}
		if len(res.Funcs) != 1 {
			return fmt.Errorf("%w: --target %s names %d functions in %s mode; name one (name@ADDRESS for one copy)", ErrBadInput, target, len(res.Funcs), mode)
		}
	}
	return nil
}

// Header describes the machine and kernel.
type Header struct {
	Tool          string            `json:"tool"`                      // "ftprobe compare"
	Version       string            `json:"ftprobe_version,omitempty"` // ftprobe version and revision that measured
	Time          time.Time         `json:"time"`                      // start of the run, UTC (RFC 3339)
	Release       string            `json:"kernel_release"`            // uname -r
	Arch          string            `json:"arch"`                      // kernel architecture: arm64, x86_64
	CPU           string            `json:"cpu_model"`                 // from /proc/cpuinfo
	CPUs          int               `json:"cpus"`                      // online CPUs
	Emulated      string            `json:"emulated,omitempty"`        // "QEMU TCG" when emulated, else absent
	Config        map[string]string `json:"kernel_config"`             // CONFIG_* keys that matter to the attach paths: y, m, or "" when unset
	Warning       string            `json:"warning,omitempty"`         // set when absolute numbers do not transfer (emulation)
	Runs          int               `json:"runs"`                      // measured runs per row, after one warm-up
	AsCompiled    bool              `json:"as_compiled,omitempty"`     // the trace bodies' programs were loaded as compiled, without the load-time specializer (FTPROBE_SPECIALIZE=off)
	GeneralObject bool              `json:"general_object,omitempty"`  // the trace bodies' programs came from the general trace object whatever their settings (FTPROBE_OBJECT=general)
}

// HitRow is one mode's hit cost.
//
// At several threads (compare --threads) a run's time is the threads'
// wall time, from the first one's start to the last one's end (team.run).
// Under QEMU TCG with instruction counting the vCPUs take turns on one
// host thread and the guest clock counts every vCPU's instructions, so
// that time holds every thread's work: N times one thread's without
// contention. On hardware the threads run in parallel and it is the
// slowest one's. So at N threads ns_over_baseline is the difference to
// the baseline measured by the same threads right before, divided by N
// under icount (clockShare): the cost in one thread's ns either way.
type HitRow struct {
	Trigger        string  `json:"trigger"`                       // kernel (BPF_PROG_TEST_RUN driver) or syscall (getppid(2) loop)
	Body           string  `json:"body"`                          // empty, trace, exit-only, agg, filtered, predicate, window or timed
	Mode           string  `json:"mode"`                          // baseline, fentry, fexit, fentry+fexit, kprobe.multi, ..., raw_tp
	Target         string  `json:"target"`                        // the probed kernel function (or tracepoint)
	Supported      bool    `json:"supported"`                     // false: the kernel refused the mode; reason says why
	Reason         string  `json:"reason,omitempty"`              // why the mode is unsupported
	Calls          int     `json:"calls_per_run"`                 // triggered calls of the target per run, by each thread
	NsPerHit       Stat    `json:"ns_per_hit"`                    // wall ns per triggered call, probe attached (several threads: the threads' wall time, from the first one's start to the last one's end, over one thread's calls; under QEMU icount about N times one thread's)
	OverheadNs     Stat    `json:"ns_over_baseline"`              // ns per call over the baseline measured right before each run (several threads under QEMU icount: divided by the threads, whose work the clock counts one after the other)
	MHitsPerSec    float64 `json:"mhits_per_s"`                   // millions of calls per second at the median, by each thread
	RatioFentry    float64 `json:"ratio_to_fentry,omitempty"`     // ns over baseline over fentry's (empty body) or fentry+fexit's (trace and filtered bodies), same trigger
	RatioEmpty     float64 `json:"ratio_to_empty,omitempty"`      // non-empty bodies: ns over baseline over the empty program's of the same mode and trigger in this run
	RatioTimed     float64 `json:"ratio_to_timed,omitempty"`      // trace, exit-only and agg bodies when the run has the timed body: ns over baseline over the timed body's (the duration floor) of the same mode and trigger
	Hits           uint64  `json:"hits_last_run"`                 // program runs counted in the last run (window body: calls rejected by the window; timed body: an exit counts only when it found its entry's timestamp)
	Expected       uint64  `json:"hits_expected"`                 // program runs the last run should count (window body: one rejection per call)
	Misses         int64   `json:"misses"`                        // expected - counted, summed over runs (fprobe and recursion misses included; timed body: exits without their entry's timestamp too)
	Drops          uint64  `json:"ringbuf_drops,omitempty"`       // trace bodies: events a full record buffer had no room for, summed over runs
	Delivered      uint64  `json:"events_delivered,omitempty"`    // trace bodies: event records read in the last run
	Reader         string  `json:"reader,omitempty"`              // trace bodies: "during" (drained while timed) or "after" (drained after each timed run)
	Threads        int     `json:"threads,omitempty"`             // threads calling the target at once, each pinned to its own CPU and making calls_per_run calls (absent in reports from before compare --threads: one)
	RatioBaseline  float64 `json:"ratio_to_baseline,omitempty"`   // ns per hit over the baseline measured right before, median over runs (several threads: the baseline's short run carries the threads' start, so this ratio is low)
	RatioOneThread float64 `json:"ratio_to_one_thread,omitempty"` // several threads: ns over baseline over the one-thread row's of the same trigger, body and mode (what calling at once from several CPUs adds)
}

// threads is h's thread count: one in reports from before the option.
func (h *HitRow) threads() int {
	return max(h.Threads, 1)
}

// AttachRow is the attach/detach cost of N functions in one mode.
type AttachRow struct {
	Mode        string `json:"mode"`               // fentry, fexit, kprobe.multi, fentry.multi, fsession.multi
	N           int    `json:"n"`                  // functions attached
	Supported   bool   `json:"supported"`          // false: the kernel refused the mode; reason says why
	Reason      string `json:"reason,omitempty"`   // why the mode is unsupported
	LoadMs      Stat   `json:"load_ms"`            // program load and verification, ms
	AttachMs    Stat   `json:"attach_ms"`          // link creation, ms
	DetachMs    Stat   `json:"detach_ms"`          // closing the links, ms
	Links       int    `json:"links"`              // BPF links created
	Programs    int    `json:"programs"`           // BPF programs loaded
	Trampolines int    `json:"trampolines"`        // BPF trampolines the links need (one per function for fentry/fexit)
	MemlockB    uint64 `json:"prog_memlock_bytes"` // sum of the programs' memlock (bpf_prog_info), bytes
}

// CrowdRow is the hit cost on the kernel trigger's target (empty body)
// while other ftrace users are present: K other functions traced by one
// kind of link (none at K=0) and, when the target is shared, the target
// itself also traced by the other attach path, so its call site walks
// ftrace's ops list.
type CrowdRow struct {
	Mode         string  `json:"mode"`                    // measured: fentry or kprobe.multi
	Target       string  `json:"target,omitempty"`        // the probed kernel function (the kernel trigger's)
	By           string  `json:"crowd_by"`                // who traces the K other functions: fentry (K links) or kprobe.multi (one link); "" at K=0
	K            int     `json:"k"`                       // other functions traced
	Shared       bool    `json:"target_shared"`           // the other attach path also traces the target (its call site walks ftrace's ops list)
	Supported    bool    `json:"supported"`               // false: the kernel refused the mode, the crowd or the sharer; reason says why
	Reason       string  `json:"reason,omitempty"`        // why the row is unsupported
	NsPerHit     Stat    `json:"ns_per_hit"`              // wall ns per triggered call, probe attached
	OverheadNs   Stat    `json:"ns_over_baseline"`        // ns per call over the baseline measured right before each run (crowd and sharer attached)
	VsK0         float64 `json:"vs_k0,omitempty"`         // ratio (x): ns over baseline, median, over the K=0 row's of the same mode and sharing
	Hits         uint64  `json:"hits_last_run"`           // program runs counted in the last measured run
	Expected     uint64  `json:"hits_expected"`           // program runs the last measured run should count
	Misses       int64   `json:"misses"`                  // expected - counted, summed over the measured runs
	SharerMisses int64   `json:"sharer_misses,omitempty"` // calls the sharer on the target did not count, over every run (warm-up and baselines included)
}

// StreamRow is streaming throughput.
type StreamRow struct {
	Mode         string  `json:"mode"`                      // the trace mode (symbols.Modes): fentry+fexit, ..., kprobe+kretprobe
	RingbufBytes uint32  `json:"ringbuf_bytes"`             // record buffer per CPU, bytes
	Supported    bool    `json:"supported"`                 // false: the kernel refused the mode; reason says why
	Reason       string  `json:"reason,omitempty"`          // why the mode is unsupported
	Calls        int     `json:"calls"`                     // triggered calls (two events each: entry and exit)
	Produced     uint64  `json:"events_produced,omitempty"` // events the programs produced (entries and exits that passed the filters)
	Delivered    uint64  `json:"events_delivered"`          // events the reader received
	Dropped      uint64  `json:"events_dropped"`            // events refused by a full record buffer
	EventsPerSec float64 `json:"events_per_s"`              // delivered events per wall second
}

// Report is one compare document (JSON schema in README: one document per
// run so runs from many kernels and machines can be merged).
type Report struct {
	Schema  string      `json:"schema"`                   // SchemaID, "ftprobe-compare/v1"
	Header  Header      `json:"header"`                   // machine and kernel
	Hit     []HitRow    `json:"hit_cost,omitempty"`       // scenario hit; absent when not run
	Attach  []AttachRow `json:"attach_cost,omitempty"`    // scenario attach; absent when not run
	Crowd   []CrowdRow  `json:"crowded_ftrace,omitempty"` // scenario crowd; absent when not run
	Stream  []StreamRow `json:"streaming,omitempty"`      // scenario stream; absent when not run
	Partial bool        `json:"partial,omitempty"`        // interrupted (Ctrl-C): only what was measured
}

// ErrBadInput marks a configuration the kernel cannot satisfy (N larger
// than the traceable functions, unknown trigger).
var ErrBadInput = errors.New("bad input")

// SchemaID names the JSON document format.
const SchemaID = "ftprobe-compare/v1"

func (c *Config) progress(f string, a ...any) {
	if c.Progress != nil {
		c.Progress(fmt.Sprintf(f, a...))
	}
}

func (c *Config) has(s string) bool {
	for _, x := range c.Scenarios {
		if x == s {
			return true
		}
	}
	return false
}

// Run performs the scenarios. On ctx cancellation it returns what it
// measured so far with Partial set. Everything it attaches is detached
// before it returns.
func Run(ctx context.Context, kin *kfeat.Info, k *symbols.Kernel, cfg Config) (*Report, error) {
	r := &Report{Schema: SchemaID, Header: Header{Tool: "ftprobe compare", Version: cfg.Version, Time: time.Now().UTC(), Release: kin.Release, Arch: kin.Arch,
		CPU: kfeat.CPUModel(), CPUs: runtime.NumCPU(), Emulated: kin.Emulated, Config: map[string]string{}, Runs: cfg.Runs, AsCompiled: cfg.NoSpecialize, GeneralObject: cfg.GeneralObject}}
	for _, key := range []string{"CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS", "CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS", "CONFIG_FPROBE",
		"CONFIG_FUNCTION_GRAPH_TRACER", "CONFIG_MITIGATION_RETPOLINE", "CONFIG_MITIGATION_RETHUNK", "CONFIG_CFI_CLANG"} {
		r.Header.Config[key] = kin.ConfigValue(key)
	}
	if b, err := os.ReadFile("/proc/cmdline"); err == nil && strings.Contains(string(b), "mitigations=off") {
		r.Header.Config["mitigations"] = "off"
	}
	if kin.Emulated != "" {
		r.Header.Warning = "measured under " + kin.Emulated + ": absolute numbers do not transfer to hardware; compare ratios within this run"
		if kin.Emulated == kfeat.EmulatedIcount {
			r.Header.Warning = "measured under QEMU TCG with instruction counting (-icount shift=0): 1 ns of guest time is 1 executed instruction, so ns are instruction counts (no caches, memory latency, lock contention or emulator overhead in them); compare ratios within this run"
		}
	}
	if err := ValidateTarget(k, cfg.Target); err != nil {
		return nil, err
	}
	th := osthread.New()
	defer th.Close()
	steps := []func() error{}
	if cfg.has("hit") {
		steps = append(steps, func() error { return runHit(ctx, kin, k, th, cfg, r) })
	}
	if cfg.has("attach") {
		steps = append(steps, func() error { return runAttach(ctx, kin, k, cfg, r) })
	}
	if cfg.has("crowd") {
		steps = append(steps, func() error { return runCrowd(ctx, kin, k, th, cfg, r) })
	}
	if cfg.has("stream") {
		steps = append(steps, func() error { return runStream(ctx, kin, k, th, cfg, r) })
	}
	for _, s := range steps {
		if err := s(); err != nil {
			if errors.Is(err, context.Canceled) {
				r.Partial = true
				r.setRatios()
				return r, nil
			}
			return r, err
		}
	}
	r.setRatios()
	return r, nil
}

// measured is one attached configuration that can count its hits.
type measured interface {
	reset() error
	hits() (uint64, error)
	close()
}

type counterM struct{ c *counter }

func (m counterM) reset() error          { return m.c.reset() }
func (m counterM) hits() (uint64, error) { return m.c.count() }
func (m counterM) close()                { m.c.Close() }

// traceM wraps ftprobe's trace programs with a draining reader.
type traceM struct {
	t      *attach.Tracer
	rd     *rings.Reader
	wg     sync.WaitGroup
	events atomic.Uint64
	base   attach.Losses
	during bool // a goroutine drains while the calls are timed
	evBase uint64
	// windowRejected: calls rejected by the --entry window since reset
	// (set by hits).
	windowRejected uint64
}

// openTrace opens ftprobe's trace program on target. during: a goroutine
// drains the record buffers from now on (as trace does); else the caller drains
// with drain() after each timed run.
func openTrace(o attach.Options, target string, k *symbols.Kernel, during bool) (*traceM, error) {
	res, err := k.Resolve([]string{target}, nil, o.Mode, 0)
	if err != nil {
		return nil, err
	}
	o.Funcs = res.Funcs
	t, err := attach.Open(context.Background(), o)
	if err != nil {
		return nil, err
	}
	rd, err := t.Reader(rings.Options{}) // counting only: no ordering
	if err != nil {
		t.Close()
		return nil, err
	}
	m := &traceM{t: t, rd: rd, during: during}
	if !during {
		return m, nil
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		var rec ringbuf.Record
		for {
			// Records never wake the reader (bpf/trace.bpf.c): poll
			// with a bounded delay, as trace does.
			rd.SetDeadline(time.Now().Add(20 * time.Millisecond))
			if err := rd.ReadInto(&rec); errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			} else if err != nil {
				return // closed (or broken): the counts say what was delivered
			}
			m.events.Add(eventsIn(rec.RawSample))
		}
	}()
	return m, nil
}

// drain reads every record committed so far (reader after the timed
// run): it stops at the second poll in a row that finds nothing.
func (m *traceM) drain() {
	if m.during {
		return
	}
	var rec ringbuf.Record
	for idle := 0; idle < 2; {
		m.rd.SetDeadline(time.Now().Add(5 * time.Millisecond))
		err := m.rd.ReadInto(&rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			idle++
			continue
		} else if err != nil {
			return
		}
		idle = 0
		m.events.Add(eventsIn(rec.RawSample))
	}
}

// eventsIn is the number of events in a trace record: 0 in a comm
// record, 2 in a call record (a leaf call's entry and exit), else 1.
func eventsIn(b []byte) uint64 {
	if len(b) < events.HeaderSize {
		return 0
	}
	switch b[unsafe.Offsetof(bpfobj.TraceRecHdr{}.Kind)] {
	case events.KindComm:
		return 0
	case events.KindCall:
		return 2
	}
	return 1
}

func (m *traceM) reset() error {
	l, err := m.t.Losses()
	m.base = l
	m.evBase = m.events.Load()
	return err
}

func (m *traceM) hits() (uint64, error) {
	l, err := m.t.Losses()
	m.windowRejected = l.WindowRejected - m.base.WindowRejected
	return l.EntryHits - m.base.EntryHits + l.ExitHits - m.base.ExitHits, err
}

// delivered drains (reader after) and returns the event records read and
// the ringbuf drops since reset.
func (m *traceM) delivered() (uint64, uint64, error) {
	m.drain()
	l, err := m.t.Losses()
	return m.events.Load() - m.evBase, l.RingbufDrops - m.base.RingbufDrops, err
}

func (m *traceM) close() {
	m.rd.Close()
	m.wg.Wait()
	m.t.Close()
}

// HitRingbufSize is each CPU's record buffer of the trace bodies when the
// reader drains after each timed run: twice the room for calls calls (of
// one thread, on its own CPU) of the largest compact records (an entry of
// 32 + 6*8 bytes and an exit of 48 bytes, each after its 8-byte length
// word: 144 bytes per call), rounded up to a power of two, at least min
// and at most 256 MiB.
func HitRingbufSize(calls int, min uint32) uint32 {
	need := uint64(calls) * 144 * 2
	sz := uint64(1 << 20)
	for sz < need && sz < 256<<20 {
		sz <<= 1
	}
	if sz < uint64(min) {
		sz = uint64(min)
	}
	return uint32(sz)
}

func (c *Config) wantMode(m string) bool {
	if len(c.Modes) == 0 || m == ModeBaseline {
		return true
	}
	for _, x := range c.Modes {
		if x == m {
			return true
		}
	}
	return false
}

// ValidModes is nil when compare takes every --mode name in ms (the
// measured HitModes), else the bad-input error for the first it does not:
// for auto or another trace mode, what it is and what compare measures
// instead; for an attach path compare does not measure, that features
// reports it; for an unknown name, the modes.
func ValidModes(ms []string) error {
	valid := HitModeNames()
	list := strings.Join(valid, ", ")
	for _, name := range ms {
		if slices.Contains(valid, name) {
			continue
		}
		if name == attach.ModeAuto {
			return fmt.Errorf("--mode auto: auto is a trace and stat mode (the kernel's best attach path); compare measures each attach path or pair by name (modes: %s)", list)
		}
		if m, ok := attach.TraceModeByName(name); ok {
			var paths []string
			for _, p := range m.Paths {
				paths = append(paths, string(p))
			}
			return fmt.Errorf("--mode %s: %s is a trace and stat mode; compare measures its attach paths one by one: %s (modes: %s)", name, name, strings.Join(paths, ", "), list)
		}
		if _, ok := attach.PathByName(name); ok {
			return fmt.Errorf("--mode %s: %s is one attach path, reported by features; compare does not measure it (modes: %s)", name, name, list)
		}
		return fmt.Errorf("--mode %q: want %s", name, list)
	}
	return nil
}

func hitModesFor(cfg Config, trigger, body string) []string {
	var out []string
	if body != BodyEmpty {
		for _, m := range TraceModes {
			if cfg.wantMode(m) {
				out = append(out, m)
			}
		}
		return out
	}
	for _, m := range HitModes[1:] {
		if m == ModeRawTP && trigger != TriggerSyscall {
			continue
		}
		if cfg.wantMode(m) {
			out = append(out, m)
		}
	}
	return out
}

// noFuncID is a function ID no resolved function holds (the window
// body's entry function).
const noFuncID = ^uint32(0)

// openMode attaches body on mode to trig's target, counting the calls of
// the threads filter names: a thread (TID) or, with several threads,
// the process (TGID: the counting programs have no such filter and
// count every caller).
func openMode(kin *kfeat.Info, k *symbols.Kernel, filter attach.Filters, trig Trigger, body, mode string, ringbuf uint32, during, noSpecialize, general bool) (measured, error) {
	if body == BodyEmpty || body == BodyTimed {
		spec, err := benchSpec(filter.TID, 1)
		if err != nil {
			return nil, err
		}
		target := trig.Target()
		c, err := attachCounter(kin, spec, mode, target, body == BodyTimed)
		if err != nil {
			return nil, err
		}
		return counterM{c}, nil
	}
	// A trace-body row is the trace mode of its name (TraceModes).
	o := attach.Options{Mode: mode, Filters: filter, RingbufSize: ringbuf, Kernel: kin, NoSpecialize: noSpecialize, GeneralObject: general}
	switch body {
	case BodyFiltered:
		o.Filters = attach.Filters{TGID: 1} // init: never the caller, so every call is rejected in the filter
	case BodyPredicate:
		// arg0 == a value no register holds: the measured thread's calls
		// pass the tid filter and are rejected by the predicate.
		o.Exprs = map[uint32]*expr.Plan{0: {
			Terms:    []expr.Term{{Fetch: expr.Fetch{Src: 0, Size: 8}, Op: expr.OpEQ, K: 0x5eedf11e5eedf11e}},
			EntryOps: []byte{expr.BoolPush},
			Filter:   "arg0 == 0x5eedf11e5eedf11e",
		}}
	case BodyWindow:
		// --entry of a function no ID names: the target is traced
		// outside every window, so each call is rejected at entry.
		o.Entries = map[uint32]bool{noFuncID: true}
	case BodyExitOnly:
		o.Filters.MinDuration = 1 // every call is at least 1 ns: one record per call, at exit
	case BodyAgg:
		o.NoEvents, o.Aggregate = true, true
	}
	m, err := openTrace(o, trig.Target(), k, during)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func runHit(ctx context.Context, kin *kfeat.Info, k *symbols.Kernel, th *thread, cfg Config, r *Report) error {
	var tm team
	if len(cfg.Threads) == 0 {
		cfg.Threads = []int{1}
	}
	if most := slices.Max(cfg.Threads); most > 1 {
		var err error
		if tm, err = newTeam(most); err != nil {
			return err
		}
		defer tm.Close()
	}
	for _, tn := range cfg.Triggers {
		if tn != TriggerKernel && tn != TriggerSyscall {
			return fmt.Errorf("%w: unknown trigger %q (want kernel or syscall)", ErrBadInput, tn)
		}
		h := &hitRun{kin: kin, k: k, th: th, team: tm, cfg: cfg, tn: tn, n: 1}
		if err := h.openTrigger(); err != nil {
			r.Hit = append(r.Hit, unsupportedTriggerRows(cfg, tn, err)...)
			continue
		}
		err := h.run(ctx, r)
		h.trig.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// unsupportedTriggerRows are the hit rows of a trigger that cannot run:
// every body's baseline and modes, with the reason.
func unsupportedTriggerRows(cfg Config, tn string, err error) []HitRow {
	var rows []HitRow
	for _, body := range cfg.Bodies {
		for _, n := range cfg.Threads {
			for _, m := range append([]string{ModeBaseline}, hitModesFor(cfg, tn, body)...) {
				rows = append(rows, HitRow{Trigger: tn, Body: body, Mode: m, Reason: err.Error(), Threads: n})
			}
		}
	}
	return rows
}

// hitRun is the hit-cost scenario of one trigger.
type hitRun struct {
	kin   *kfeat.Info
	k     *symbols.Kernel
	th    *thread
	cfg   Config
	tn    string  // trigger name
	trig  Trigger // open trigger
	calls int     // triggered calls per measurement, by each thread
	// team: the pinned threads when some row has several (else nil: th
	// alone calls); n: how many of them the rows measured now use.
	team team
	n    int
}

// filter is what the probes count: th's calls when it calls alone, else
// the process's (every thread of the team).
func (h *hitRun) filter() attach.Filters {
	if h.team == nil {
		return attach.Filters{TID: h.th.TID}
	}
	return attach.Filters{TGID: uint32(os.Getpid())}
}

// trigger runs the trigger's calls: on th, or on the team's first n
// threads at once, returning their span (team.run).
func (h *hitRun) trigger() (time.Duration, error) {
	if h.team == nil {
		return h.trig.Run(h.calls)
	}
	return h.team.run(h.n, func() (time.Duration, error) { return h.trig.loop(h.calls) })
}

// openTrigger opens the trigger and sets the calls per measurement.
func (h *hitRun) openTrigger() error {
	calls := h.cfg.Calls
	switch h.tn {
	case TriggerKernel:
		trig, err := newKernelTrigger(h.cfg.Batch, h.th)
		if err != nil {
			return err
		}
		h.trig = trig
	case TriggerSyscall:
		h.trig = newSyscallTrigger(h.k, h.th, h.cfg.Target)
		calls = h.cfg.SyscallCalls
	}
	h.calls = triggeredCalls(h.trig, calls)
	return nil
}

// run measures every body of the trigger at each thread count,
// appending its rows to r; on cancellation the rows measured so far are
// kept.
func (h *hitRun) run(ctx context.Context, r *Report) error {
	for _, body := range h.cfg.Bodies {
		for _, n := range h.cfg.Threads {
			h.n = n
			if err := h.runBody(ctx, r, body); err != nil {
				return err
			}
		}
	}
	return nil
}

// runBody measures body at h.n threads, appending its rows to r.
func (h *hitRun) runBody(ctx context.Context, r *Report, body string) error {
	b := h.newBody(body)
	for run := -1; run < h.cfg.Runs; run++ {
		for _, m := range b.modes {
			if !b.rows[m].Supported {
				continue
			}
			if err := ctx.Err(); err != nil {
				b.finish(r)
				return err
			}
			h.cfg.progress("hit cost: %s trigger, %s body%s, run %d/%d, %s", h.tn, body, h.threadsNote(), run+1, h.cfg.Runs, m)
			if err := h.measure(b, m, run); err != nil {
				return err
			}
		}
	}
	b.finish(r)
	return ctx.Err()
}

// threadsNote is ", N threads" when the team calls, for progress lines.
func (h *hitRun) threadsNote() string {
	if h.team == nil {
		return ""
	}
	return ", " + plural.Count(h.n, "thread")
}

// hitBody collects one trigger, body and thread count's runs: the
// baseline and every mode's row and samples (ns per call, over the
// baseline, and over it as a ratio).
type hitBody struct {
	body                  string
	threads               int
	modes                 []string
	base                  *HitRow
	rows                  map[string]*HitRow
	baseS                 []float64
	samples, over, ratios map[string][]float64
	// share is how many threads' work one run's time holds per call:
	// clockShare.
	share float64
}

func (h *hitRun) newBody(body string) *hitBody {
	row := func(m string) *HitRow {
		return &HitRow{Trigger: h.tn, Body: body, Mode: m, Target: h.trig.Target(), Supported: true, Calls: h.calls, Threads: h.n}
	}
	b := &hitBody{body: body, threads: h.n, share: clockShare(h.kin, h.n), modes: hitModesFor(h.cfg, h.tn, body), base: row(ModeBaseline),
		rows: map[string]*HitRow{}, samples: map[string][]float64{}, over: map[string][]float64{}, ratios: map[string][]float64{}}
	for _, m := range b.modes {
		b.rows[m] = row(m)
	}
	return b
}

// measure runs the trigger bare, then with mode m's probe attached, and
// records both into b unless run is the warm-up (-1). A mode that cannot
// attach is marked unsupported; a trigger or counter failure is an error.
func (h *hitRun) measure(b *hitBody, m string, run int) error {
	row := b.rows[m]
	bt, err := h.trigger()
	if err != nil {
		return fmt.Errorf("%s trigger: %w", h.tn, err)
	}
	rbSize := h.cfg.RingbufSize
	if !h.cfg.ReaderDuring {
		// Each thread writes into its own CPU's buffer.
		rbSize = HitRingbufSize(h.calls, h.cfg.RingbufSize)
	}
	mm, err := openMode(h.kin, h.k, h.filter(), h.trig, b.body, m, rbSize, h.cfg.ReaderDuring, h.cfg.NoSpecialize, h.cfg.GeneralObject)
	if err != nil {
		row.Supported, row.Reason = false, reasonOf(err)
		return nil
	}
	mm.reset()
	mt, err := h.trigger()
	hits, herr := mm.hits()
	var drops, deliv uint64
	if tm, ok := mm.(*traceM); ok && herr == nil {
		deliv, drops, herr = tm.delivered()
		row.Reader = "after"
		if h.cfg.ReaderDuring {
			row.Reader = "during"
		}
	}
	mm.close()
	if err != nil || herr != nil {
		return fmt.Errorf("%s %s: %w", h.tn, m, errors.Join(err, herr))
	}
	if run < 0 {
		return nil // warm-up
	}
	b.add(m, bt, mt)
	calls := uint64(h.calls * h.n)
	exp := calls * hitsPerCall(m)
	if b.body == BodyFiltered || b.body == BodyPredicate {
		exp = 0
	}
	if tm, ok := mm.(*traceM); ok && b.body == BodyWindow {
		// Every call rejected at entry by the window, once
		// per call whatever the mode's program runs.
		hits, exp = tm.windowRejected, calls
	}
	row.Hits, row.Expected = hits, exp
	row.Drops += drops
	row.Delivered = deliv
	// Runs skipped by fprobe or recursion protection are
	// absent from hits, so they are counted here once.
	row.Misses += int64(exp) - int64(hits)
	return nil
}

// add records one run of mode m: the trigger's time without (bt) and with
// (mt) the probe, per call of one thread (team.run's span at several),
// their ratio, and their difference over b.share: in one thread's ns.
func (b *hitBody) add(m string, bt, mt time.Duration) {
	calls := float64(b.rows[m].Calls)
	base := float64(bt.Nanoseconds()) / calls
	v := float64(mt.Nanoseconds()) / calls
	b.baseS = append(b.baseS, base)
	b.samples[m] = append(b.samples[m], v)
	if base > 0 {
		b.ratios[m] = append(b.ratios[m], v/base)
	}
	b.over[m] = append(b.over[m], (v-base)/max(b.share, 1))
}

// clockShare is how many threads' work a run of n threads takes per call
// of one: n when the clock counts the instructions of every vCPU, run one
// after the other (QEMU TCG with -icount), else 1 (CPUs in parallel:
// hardware; plain TCG runs vCPUs on host threads, as parallel as the
// host's free cores allow, so its figures at several threads are rough).
func clockShare(kin *kfeat.Info, n int) float64 {
	if kin != nil && kin.Emulated == kfeat.EmulatedIcount {
		return float64(n)
	}
	return 1
}

// setRatios sets RatioEmpty of every non-empty body row: its ns over
// baseline over the empty row's of the same mode, trigger and threads;
// RatioTimed of every trace, exit-only and agg row: over the timed row's
// (the duration floor), when the run has one; and RatioOneThread of
// every row of several threads: over the one-thread row's of the same
// trigger, body and mode.
func (r *Report) setRatios() {
	type key struct {
		trig, body, mode string
		threads          int
	}
	over := map[key]float64{}
	for _, h := range r.Hit {
		if h.Supported && h.Mode != ModeBaseline {
			over[key{h.Trigger, h.Body, h.Mode, h.threads()}] = h.OverheadNs.Median
		}
	}
	for i := range r.Hit {
		h := &r.Hit[i]
		if !h.Supported || h.Mode == ModeBaseline {
			continue
		}
		if e := over[key{h.Trigger, BodyEmpty, h.Mode, h.threads()}]; h.Body != BodyEmpty && e > 0 {
			h.RatioEmpty = h.OverheadNs.Median / e
		}
		if f := over[key{h.Trigger, BodyTimed, h.Mode, h.threads()}]; (h.Body == BodyTrace || h.Body == BodyExitOnly || h.Body == BodyAgg) && f > 0 {
			h.RatioTimed = h.OverheadNs.Median / f
		}
		if one := over[key{h.Trigger, h.Body, h.Mode, 1}]; h.threads() > 1 && one > 0 {
			h.RatioOneThread = h.OverheadNs.Median / one
		}
	}
}

// finish computes the rows' statistics and ratios to fentry's and to the
// baseline, and appends the baseline and mode rows to r.
func (b *hitBody) finish(r *Report) {
	base, rows, samples, over := b.base, b.rows, b.samples, b.over
	base.NsPerHit = NewStat(b.baseS)
	if base.NsPerHit.Median > 0 {
		base.MHitsPerSec = 1e3 / base.NsPerHit.Median
	}
	r.Hit = append(r.Hit, *base)
	var fentry float64
	if s, ok := over[ModeFentry]; ok {
		fentry = NewStat(s).Median
	} else if s, ok := over[ModeFentryFexit]; ok && base.Body != BodyEmpty {
		fentry = NewStat(s).Median
	}
	for _, m := range b.modes {
		row := rows[m]
		if row.Supported && len(samples[m]) > 0 {
			row.NsPerHit = NewStat(samples[m])
			row.OverheadNs = NewStat(over[m])
			if row.NsPerHit.Median > 0 {
				row.MHitsPerSec = 1e3 / row.NsPerHit.Median
			}
			if fentry > 0 {
				row.RatioFentry = row.OverheadNs.Median / fentry
			}
			row.RatioBaseline = NewStat(b.ratios[m]).Median
		}
		r.Hit = append(r.Hit, *row)
	}
}

func reasonOf(err error) string {
	var re *kfeat.ReasonError
	if errors.As(err, &re) {
		return re.Reason
	}
	return err.Error()
}

// candidates returns up to n functions traceable in both fentry+fexit and
// kprobe.multi+kretprobe.multi mode, in a stable order, for the attach and crowd scenarios.
func candidates(k *symbols.Kernel, n int, exclude string) ([]*symbols.Func, error) {
	globs := []string{"vfs_*", "do_*", "ksys_*", "security_*", "proc_*", "seq_*", "kernfs_*", "path_*", "d_*", "inode_*", "file_*", "filp_*", "generic_*", "mnt_*", "sysfs_*", "kobject_*", "dput*", "iput*", "simple_*"}
	seen := map[string]bool{exclude: true}
	var out []*symbols.Func
	for _, g := range globs {
		res, err := k.Resolve([]string{g}, nil, symbols.ModeFentryFexit, 0)
		if err != nil {
			continue
		}
		sort.Slice(res.Funcs, func(i, j int) bool { return res.Funcs[i].Name < res.Funcs[j].Name })
		for _, f := range res.Funcs {
			if seen[f.Name] || f.Copies > 1 || f.Skip[symbols.ModeKprobeMulti] != "" || strings.Contains(f.Name, "lock") || strings.Contains(f.Name, "idle") {
				continue
			}
			seen[f.Name] = true
			out = append(out, f)
			if len(out) == n {
				return out, nil
			}
		}
	}
	if len(out) < n {
		return out, fmt.Errorf("%w: only %s traceable in both modes here, fewer than N=%d", ErrBadInput, plural.Count(len(out), "function"), n)
	}
	return out, nil
}

func runAttach(ctx context.Context, kin *kfeat.Info, k *symbols.Kernel, cfg Config, r *Report) error {
	maxN := 0
	for _, n := range cfg.AttachN {
		maxN = max(maxN, n)
	}
	all, err := candidates(k, maxN, "")
	if err != nil {
		return err
	}
	spec, err := benchSpec(0, 1)
	if err != nil {
		return err
	}
	for _, n := range cfg.AttachN {
		fs := all[:n]
		for _, mode := range AttachModes {
			row := AttachRow{Mode: mode, N: n, Supported: true}
			var loadS, attS, detS []float64
			for run := 0; run < cfg.Runs && row.Supported; run++ {
				if err := ctx.Err(); err != nil {
					r.Attach = append(r.Attach, row)
					return err
				}
				cfg.progress("attach cost: %s, N=%d, run %d/%d", mode, n, run+1, cfg.Runs)
				ld, at, dt, info, err := attachOnce(kin, spec, mode, fs)
				if err != nil {
					row.Supported, row.Reason = false, reasonOf(err)
					break
				}
				loadS = append(loadS, ms(ld))
				attS = append(attS, ms(at))
				detS = append(detS, ms(dt))
				row.Links, row.Programs, row.Trampolines, row.MemlockB = info.links, info.progs, info.tramps, info.memlock
			}
			if row.Supported {
				row.LoadMs, row.AttachMs, row.DetachMs = NewStat(loadS), NewStat(attS), NewStat(detS)
			}
			r.Attach = append(r.Attach, row)
		}
	}
	return nil
}

// AttachModes are the attach-cost scenario's modes: one kprobe.multi link,
// N fentry (fexit) links, and one tracing multi link (7.x).
var AttachModes = []string{ModeKprobeMulti, ModeFentry, ModeFexit, ModeFentryMulti, ModeFSessionMulti}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

type attachInfo struct {
	links, progs, tramps int
	memlock              uint64
}

// attachOnce loads and attaches the counting program of mode to fs
// through the attach layer (attach.OpenPath), then detaches, timing each
// phase.
func attachOnce(kin *kfeat.Info, spec *ebpf.CollectionSpec, mode string, fs []*symbols.Func) (load, att, det time.Duration, info attachInfo, err error) {
	path := attach.Path(mode)
	pp, err := attach.OpenPath(context.Background(), path, attach.PathOptions{Spec: spec, Program: attach.CountingProgram[path], Funcs: fs})
	if err != nil {
		return 0, 0, 0, info, kin.Explain(mode, "", err)
	}
	defer pp.Close()
	info = attachInfo{links: pp.Links(), progs: pp.Programs(), tramps: pp.Trampolines, memlock: pp.Memlock()}
	return pp.LoadTime, pp.AttachTime, pp.Detach(), info, nil
}

// Crowd kinds: who else traces functions while the target is measured.
const (
	CrowdByFentry      = "fentry"       // K fentry links: one trampoline each, and one direct ftrace_ops each unless the kernel shares one (CONFIG_HAVE_SINGLE_FTRACE_DIRECT_OPS, x86-64 7.x)
	CrowdByKprobeMulti = "kprobe.multi" // one kprobe.multi link over K functions: fprobe's one shared ftrace_ops
)

// crowdModes are the modes measured under a crowd.
var crowdModes = []string{ModeFentry, ModeKprobeMulti}

// sharerOf is the probe put on the target itself in the shared rows: the
// other attach path, so the target's call site has two ftrace_ops and goes
// through ftrace's ops list (ftrace_ops_list_func) instead of a call to its
// one ops or trampoline.
func sharerOf(mode string) string {
	if mode == ModeFentry {
		return ModeKprobeMulti
	}
	return ModeFentry
}

// runCrowd measures the hit cost of fentry and kprobe.multi on the kernel
// trigger's target (empty body) with K other functions traced by each
// crowd kind in cfg.CrowdBy, with the target traced by nobody else and
// shared with the other attach path. K=0 is measured once, without a
// crowd, as the reference of vs_k0. Every sample is taken against a
// baseline measured right before it, with the crowd (and the sharer)
// attached, so ns over baseline is the measured mode's own cost under that
// crowd.
func runCrowd(ctx context.Context, kin *kfeat.Info, k *symbols.Kernel, th *thread, cfg Config, r *Report) error {
	bys := cfg.CrowdBy
	if len(bys) == 0 {
		bys = []string{CrowdByFentry, CrowdByKprobeMulti}
	}
	type block struct {
		by string
		k  int
	}
	var blocks []block
	for _, kk := range cfg.CrowdK {
		if kk == 0 {
			blocks = append(blocks, block{"", 0})
			continue
		}
		for _, by := range bys {
			blocks = append(blocks, block{by, kk})
		}
	}
	trig, err := newKernelTrigger(cfg.Batch, th)
	if err != nil {
		for _, b := range blocks {
			for _, shared := range []bool{false, true} {
				for _, m := range crowdModes {
					r.Crowd = append(r.Crowd, CrowdRow{Mode: m, By: b.by, K: b.k, Shared: shared, Reason: err.Error()})
				}
			}
		}
		return nil
	}
	defer trig.Close()
	calls := triggeredCalls(trig, cfg.Calls)
	maxK := 0
	for _, kk := range cfg.CrowdK {
		maxK = max(maxK, kk)
	}
	others, err := candidates(k, maxK, trig.Target())
	if err != nil {
		return err
	}
	spec, err := benchSpec(th.TID, 1)
	if err != nil {
		return err
	}
	crowdSpec, err := benchSpec(0, 1)
	if err != nil {
		return err
	}
	first := len(r.Crowd)
	defer func() { setVsK0(r.Crowd[first:]) }()
	for _, b := range blocks {
		if err := ctx.Err(); err != nil {
			return err
		}
		var crowd func()
		var cerr error
		if b.k > 0 {
			cfg.progress("crowded ftrace: attaching %d other functions by %s", b.k, b.by)
			crowd, cerr = crowdAttach(ctx, kin, crowdSpec, b.by, others[:b.k])
			if cerr != nil && ctx.Err() != nil {
				return ctx.Err() // crowdAttach detached what it had attached
			}
		}
		for _, shared := range []bool{false, true} {
			for _, mode := range crowdModes {
				row := CrowdRow{Mode: mode, Target: trig.Target(), By: b.by, K: b.k, Shared: shared, Supported: true}
				if cerr != nil {
					row.Supported, row.Reason = false, "crowd: "+reasonOf(cerr)
					r.Crowd = append(r.Crowd, row)
					continue
				}
				err := measureCrowded(ctx, kin, spec, trig, calls, cfg, &row)
				r.Crowd = append(r.Crowd, row)
				if err != nil {
					if crowd != nil {
						crowd()
					}
					return err
				}
			}
		}
		if crowd != nil {
			crowd()
		}
	}
	return nil
}

// measureCrowded fills row with cfg.Runs samples (after one warm-up) of the
// row's mode on trig's target, each against a baseline measured right
// before it; in a shared row the other attach path (sharerOf) stays on the
// target throughout and must count every call triggered meanwhile.
// Unsupported modes mark the row; only ctx cancellation and trigger
// failures are returned, and the row keeps what was measured before them.
func measureCrowded(ctx context.Context, kin *kfeat.Info, spec *ebpf.CollectionSpec, trig Trigger, calls int, cfg Config, row *CrowdRow) (err error) {
	var nsS, ovS []float64
	var sharerWant uint64 // calls triggered while the sharer was attached
	defer func() {
		if row.Supported && len(nsS) == 0 && err != nil {
			row.Supported, row.Reason = false, "interrupted before a measured run: "+err.Error()
		}
		row.NsPerHit, row.OverheadNs = NewStat(nsS), NewStat(ovS)
	}()
	if row.Shared {
		s, err := attachCounter(kin, spec, sharerOf(row.Mode), trig.Target(), false)
		if err != nil {
			row.Supported, row.Reason = false, "sharer "+sharerOf(row.Mode)+": "+reasonOf(err)
			return nil
		}
		defer s.Close()
		defer func() {
			if n, cerr := s.count(); cerr == nil && row.Supported {
				row.SharerMisses = int64(sharerWant) - int64(n)
			}
		}()
		if err := s.reset(); err != nil {
			return fmt.Errorf("crowd: sharer %s: reset its counter: %w", sharerOf(row.Mode), err)
		}
	}
	by := row.By
	if by == "" {
		by = "nobody"
	}
	for run := -1; run < cfg.Runs; run++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if run < 0 {
			cfg.progress("crowded ftrace: %s, K=%d by %s, target shared=%v, warm-up", row.Mode, row.K, by, row.Shared)
		} else {
			cfg.progress("crowded ftrace: %s, K=%d by %s, target shared=%v, run %d/%d", row.Mode, row.K, by, row.Shared, run+1, cfg.Runs)
		}
		bt, err := trig.Run(calls)
		if err != nil {
			return fmt.Errorf("crowd: kernel trigger: %w", err)
		}
		sharerWant += uint64(calls)
		c, err := attachCounter(kin, spec, row.Mode, trig.Target(), false)
		if err != nil {
			row.Supported, row.Reason = false, reasonOf(err)
			return nil
		}
		rerr := c.reset()
		mt, err := trig.Run(calls)
		if err == nil {
			sharerWant += uint64(calls)
		}
		hits, herr := c.count()
		c.Close()
		if err != nil || herr != nil || rerr != nil {
			return fmt.Errorf("crowd: %s: %w", row.Mode, errors.Join(err, herr, rerr))
		}
		if run < 0 {
			continue
		}
		row.Hits, row.Expected = hits, uint64(calls)
		row.Misses += int64(calls) - int64(hits)
		b := float64(bt.Nanoseconds()) / float64(calls)
		v := float64(mt.Nanoseconds()) / float64(calls)
		nsS = append(nsS, v)
		ovS = append(ovS, v-b)
	}
	return nil
}

// setVsK0 sets each supported row's VsK0: its ns over baseline (median)
// over the K=0 row's of the same mode and sharing. The blocks are measured
// minutes apart under TCG, so drift between them is not cancelled; when
// the crowd does not change the alone path, the "alone" rows of each block
// bound it. (A per-run ratio to the baseline
// would cancel it, but the kernel trigger's baseline is tens of ns, and
// its noise swamped such ratios in the lab.)
func setVsK0(rows []CrowdRow) {
	type key struct {
		mode   string
		shared bool
	}
	ref := map[key]float64{}
	for _, row := range rows {
		if _, seen := ref[key{row.Mode, row.Shared}]; row.K == 0 && row.Supported && !seen {
			ref[key{row.Mode, row.Shared}] = row.OverheadNs.Median
		}
	}
	for i := range rows {
		if x := ref[key{rows[i].Mode, rows[i].Shared}]; x > 0 && rows[i].Supported {
			rows[i].VsK0 = rows[i].OverheadNs.Median / x
		}
	}
}

// crowdAttach traces fs with counting programs: K fentry links (by
// CrowdByFentry) or one kprobe.multi link (CrowdByKprobeMulti). It returns
// the func that detaches them; on error (ctx cancellation included)
// nothing stays attached.
func crowdAttach(ctx context.Context, kin *kfeat.Info, spec *ebpf.CollectionSpec, by string, fs []*symbols.Func) (func(), error) {
	if len(fs) == 0 {
		return func() {}, nil
	}
	if by != CrowdByFentry && by != CrowdByKprobeMulti {
		return nil, fmt.Errorf("%w: unknown crowd kind %q (want %s or %s)", ErrBadInput, by, CrowdByFentry, CrowdByKprobeMulti)
	}
	path := attach.Path(by)
	pp, err := attach.OpenPath(ctx, path, attach.PathOptions{Spec: spec, Program: attach.CountingProgram[path], Funcs: fs})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, kin.Explain(by, fmt.Sprintf("%d crowd functions", len(fs)), err)
	}
	return pp.Close, nil
}

func runStream(ctx context.Context, kin *kfeat.Info, k *symbols.Kernel, th *thread, cfg Config, r *Report) error {
	trig, err := newKernelTrigger(cfg.Batch, th)
	if err != nil {
		r.Stream = append(r.Stream, StreamRow{Reason: err.Error()})
		return nil
	}
	defer trig.Close()
	calls := triggeredCalls(trig, cfg.StreamCalls)
	for _, mode := range StreamModes {
		if err := ctx.Err(); err != nil {
			return err
		}
		cfg.progress("streaming: %s, %d-byte record buffers, %d calls", mode, cfg.RingbufSize, calls)
		row := StreamRow{Mode: mode, RingbufBytes: cfg.RingbufSize, Supported: true, Calls: calls}
		m, err := openTrace(attach.Options{Mode: mode, Filters: attach.Filters{TID: th.TID}, RingbufSize: cfg.RingbufSize, Kernel: kin, NoSpecialize: cfg.NoSpecialize, GeneralObject: cfg.GeneralObject}, trig.Target(), k, true)
		if err != nil {
			row.Supported, row.Reason = false, reasonOf(err)
			r.Stream = append(r.Stream, row)
			continue
		}
		start := time.Now()
		trig.Run(calls)
		// Let the reader drain what the kernel accepted.
		l, _ := m.t.Losses()
		want := l.EntryHits + l.ExitHits - l.RingbufDrops
		for deadline := time.Now().Add(10 * time.Second); m.events.Load() < want && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		el := time.Since(start)
		row.Delivered = m.events.Load()
		row.Dropped = l.RingbufDrops
		row.Produced = l.EntryHits + l.ExitHits
		row.EventsPerSec = float64(row.Delivered) / el.Seconds()
		m.close()
		r.Stream = append(r.Stream, row)
	}
	return nil
}
