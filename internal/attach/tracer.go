package attach

import (
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/rings"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Tracer holds the loaded programs, maps and links of one trace. The caller
// must Close it; Close detaches every link.
type Tracer struct {
	// Mode is the trace mode attached (ModeMixed: the two modes
	// taken joined by '+', e.g. "fentry+fexit+kprobe.session").
	Mode     string
	Attached []*symbols.Func // attached functions
	Failed   []Failure       // functions left out, with reasons

	maps  bpfobj.TraceMaps
	geo   rings.Geometry   // the areas map's layout: the records of each online CPU
	coll  *ebpf.Collection // every map of the object, .bss and .rodata included
	armed *ebpf.Variable   // armed (.bss)
	// armedAt is CLOCK_MONOTONIC (bpf_ktime_get_ns's clock) just before
	// armed was set: no event is older.
	armedAt uint64
	stats   *ebpf.Variable // ftp_stats (.bss)
	// windowExits counts threads that exited inside an --entry window (.bss).
	windowExits *ebpf.Variable
	aggFuncs    []*symbols.Func // functions of the aggs table, by id
	// Verified is the number of programs loaded by a DryRun.
	Verified int
	// verifiedFuncs counts the functions whose programs a DryRun
	// loaded (bound to one function, or the multi programs' set).
	verifiedFuncs int
	// Frames says where the per-thread frame stacks live: "task storage"
	// or, where a program type cannot use it, "hash".
	Frames string
	// DataPath names the BPF object loaded (variants): "lean" (the
	// plain trace), "filter" (records with --filter, --min-duration,
	// --errors or --live-entries), "stat" (tables without records) or
	// "general".
	DataPath string
	// Simplified is the number of instructions of the object's programs
	// that its settings rule out, removed or made nops before load
	// (specialize.Simplify: decided jumps, unreachable paths, dead writes).
	Simplified int
	comm       []link.Link // comm tracking (task_rename, sched_process_exec)
	progs      []*ebpf.Program
	links      []link.Link
	fork       link.Link         // --tree: follows forks into tgids
	exit       link.Link         // --tree: forgets exited processes
	exec       link.Link         // --tree: starts tracing a process added with AddTGIDAtExec at its exec
	multi      []link.Link       // kprobe.multi, kretprobe.multi and kprobe.session links
	tramp      *TrampolineLoader // fsession and the tracing multi links
	closeOnce  sync.Once
	detaching  func(closed, total int)  // Options.Detaching
	missed     uint64                   // kprobe.multi missed runs read at Detach
	progFunc   map[*ebpf.Program]string // per-function programs: the function
	slots      SlotLoads                // fentry/fexit programs by argument reads (loadForFunc)
}

// ArgReads returns how many per-function trampoline programs (fentry,
// fexit, fsession) read their arguments straight from ctx and how many
// read them through bpf_get_func_arg, as compiled (SlotLoads). Both 0 in
// the other modes.
func (t *Tracer) ArgReads() (direct, compiled int64) {
	return t.slots.Direct.Load(), t.slots.Compiled.Load()
}

// Reader opens a reader of the records of every CPU (Areas) with o; the
// caller closes it.
func (t *Tracer) Reader(o rings.Options) (*rings.Reader, error) {
	return rings.NewReader(t.maps.Areas, t.geo, o)
}

// AddTGID adds a process to the tree filter (Filters.Tree). Its forks are
// followed, and every process of the tree is forgotten when its last
// thread exits.
func (t *Tracer) AddTGID(tgid uint32) error {
	return t.maps.Tgids.Put(tgid, uint8(1)) // FTP_TREE_TRACED
}

// AddTGIDAtExec adds a process to the tree filter from its next exec on
// (tp_btf/sched_process_exec): a launcher's own calls before it execs the
// command are left out. Its forks before that exec wait for their own.
func (t *Tracer) AddTGIDAtExec(tgid uint32) error {
	return t.maps.Tgids.Put(tgid, uint8(2)) // FTP_TREE_AT_EXEC
}

// TreeSize returns how many processes the tree filter follows now
// (entries of the tgids map).
func (t *Tracer) TreeSize() int { return len(t.TreeTGIDs()) }

// TreeTGIDs returns the processes (tgids) the tree filter follows now, in
// the tgids map's iteration order.
func (t *Tracer) TreeTGIDs() []uint32 {
	var k uint32
	var v uint8
	var tgids []uint32
	it := t.maps.Tgids.Iterate()
	for it.Next(&k, &v) {
		tgids = append(tgids, k)
	}
	return tgids
}

// ArmedAt is when recording started: CLOCK_MONOTONIC, the clock of the
// records' ts_ns (bpf_ktime_get_ns), in ns, read just before the programs
// were armed, so no event is older (0 if the clock could not be read).
// Since leaf records (Options.LiveEntries unset), a call's entry can
// arrive after another thread's later event: relative times count from
// here, not from the first event delivered.
func (t *Tracer) ArmedAt() uint64 { return t.armedAt }
