package attach

import (
	"context"
	"errors"
	"runtime"
	"sort"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

func (t *Tracer) openFentry(spec *ebpf.CollectionSpec, repl map[string]*ebpf.Map, opts Options) error {
	raiseNofile(4*len(opts.Funcs) + 256) // 2 programs + 2 links per function
	newWorker := func() func(f *symbols.Func) ([]*ebpf.Program, []link.Link, error) {
		local := spec.Copy() // per worker: AttachTo changes per function
		return func(f *symbols.Func) (progs []*ebpf.Program, links []link.Link, err error) {
			for _, pt := range []struct {
				name string
				at   ebpf.AttachType
				mode string
			}{{"ftp_fentry", ebpf.AttachTraceFEntry, "fentry"}, {"ftp_fexit", ebpf.AttachTraceFExit, "fexit"}} {
				if pt.at == ebpf.AttachTraceFExit && f.EntryOnly != "" {
					break // the verifier rejects fexit on a noreturn function
				}
				if err := opts.stopped(); err != nil {
					return progs, links, err
				}
				// Entry first: a call in flight when its exit probe
				// arrives then returns "without entry" only if it
				// started before the entry probe, which is counted
				// as in flight, not as a loss.
				prog, err := loadForFunc(spec.Programs[pt.name], f, &t.slots, func(ps *ebpf.ProgramSpec) (*ebpf.Program, error) {
					local.Programs[pt.name] = ps
					return opts.loadUnlessStopped(local, pt.name, repl)
				})
				if err != nil {
					return progs, links, opts.Kernel.Explain(pt.mode, f.Display(), err)
				}
				progs = append(progs, prog)
				if err := opts.stopped(); err != nil {
					return progs, links, err
				}
				l, err := LinkFunc(prog, pt.at, opts.cookie(f))
				if err != nil {
					return progs, links, opts.Kernel.Explain(pt.mode, f.Display(), err)
				}
				links = append(links, l)
			}
			return progs, links, nil
		}
	}
	return t.perFunction(opts, newWorker)
}

// perFunction attaches opts.Funcs one by one on up to 8 workers, each
// made by newWorker (which may hold per-worker state), keeping the
// programs and links of the functions that attach and recording the
// others in Failed. It fails only when none attaches, with the first
// unsupported/privilege reason if there was one.
func (t *Tracer) perFunction(opts Options, newWorker func() func(f *symbols.Func) ([]*ebpf.Program, []link.Link, error)) error {
	type result struct {
		f     *symbols.Func
		progs []*ebpf.Program
		links []link.Link
		err   error
	}
	jobs := make(chan *symbols.Func)
	results := make(chan result)
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.NumCPU(), 8); w++ {
		wg.Add(1)
		work := newWorker()
		go func() {
			defer wg.Done()
			for f := range jobs {
				r := result{f: f}
				r.progs, r.links, r.err = work(f)
				results <- r
			}
		}()
	}
	go func() {
		// Once Open's context is done no function is handed out: the
		// workers finish the one they hold, and Open closes all.
		var done <-chan struct{}
		if opts.ctx != nil {
			done = opts.ctx.Done()
		}
	feed:
		for _, f := range opts.Funcs {
			select {
			case jobs <- f:
			case <-done:
				break feed
			}
		}
		close(jobs)
		wg.Wait()
		close(results)
	}()
	done := 0
	var firstUnsupported error
	for r := range results {
		done++
		if opts.Progress != nil {
			opts.Progress(done, len(opts.Funcs))
		}
		if r.err != nil {
			for _, l := range r.links {
				l.Close()
			}
			for _, p := range r.progs {
				p.Close()
			}
			t.Failed = append(t.Failed, Failure{r.f, r.err})
			if firstUnsupported == nil && (errors.Is(r.err, kfeat.ErrUnsupported) || errors.Is(r.err, kfeat.ErrPrivilege)) {
				firstUnsupported = r.err
			}
			continue
		}
		t.progs = append(t.progs, r.progs...)
		t.links = append(t.links, r.links...)
		t.Attached = append(t.Attached, r.f)
		if t.progFunc == nil {
			t.progFunc = map[*ebpf.Program]string{}
		}
		for _, p := range r.progs {
			t.progFunc[p] = r.f.Display()
		}
	}
	sort.Slice(t.Attached, func(i, j int) bool { return t.Attached[i].ID < t.Attached[j].ID })
	sort.Slice(t.Failed, func(i, j int) bool { return t.Failed[i].Func.ID < t.Failed[j].Func.ID })
	if err := opts.interrupted("attaching", len(t.Attached), len(opts.Funcs)); err != nil {
		return err
	}
	if len(t.Attached) == 0 {
		if firstUnsupported != nil {
			return firstUnsupported
		}
		return t.Failed[0].Err
	}
	return nil
}

// stopped returns context.Cause of Open's context once it is done: a
// per-function worker then loads and links no more. Under TCG one
// program load of the trace object takes seconds (arm64), a link and its
// close another one or two: what an interrupted worker still starts
// delays the stop by that much.
func (opts Options) stopped() error {
	if opts.done() {
		return context.Cause(opts.ctx)
	}
	return nil
}

// loadUnlessStopped is loadWithMaps with opts.BTF, unless Open's context
// is done (stopped): loadForFunc's second try is then not made either.
func (opts Options) loadUnlessStopped(spec *ebpf.CollectionSpec, name string, repl map[string]*ebpf.Map) (*ebpf.Program, error) {
	if err := opts.stopped(); err != nil {
		return nil, err
	}
	return loadWithMaps(spec, name, repl, opts.BTF)
}
