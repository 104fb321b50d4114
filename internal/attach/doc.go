// Package attach loads ftprobe's trace programs (bpf/trace.bpf.c) and
// attaches them to kernel functions in one of the trace modes
// (TraceModes), each named by the kernel attach paths it links (Paths):
// per function through BPF trampolines reached by an ftrace direct call
// (fentry+fexit, fsession), through one tracing multi link for all
// functions (fsession.multi, fentry.multi+fexit.multi), through fprobe
// (kprobe.session, kprobe.multi+kretprobe.multi: one link for all
// functions), or one kprobe and kretprobe per function (kprobe+kretprobe).
// ModeMixed puts the functions trampolines cannot take on an fprobe link.
//
// Open runs the phases of a trace, each in its own file:
//
//   - plan (open.go, variants.go, predicates.go, rodata.go, fold.go): the
//     object variant the options select, its settings frozen, the
//     --filter predicates spliced, the paths the settings rule out removed;
//   - load (open.go): the maps, once, shared by every program; then each
//     program, per function where the mode binds one to a function
//     (fentry.go, sessions.go, slots.go);
//   - attach (fentry.go, sessions.go, kprobe.go, bisect.go): the links,
//     functions the kernel refuses recorded in Tracer.Failed (a multi link
//     is bisected to find them); a DryRun loads every program and
//     attaches none (dryrun.go);
//   - activate (open.go): the programs record from the moment `armed` is
//     set, once every link is in place;
//   - detach (detach.go): Detach closes the links (the ringbuf and the
//     counters stay readable: losses.go, tables.go), Close frees the rest.
//
// Open checks its context between functions in every phase and, once it
// is done, closes what it made and returns an *Interrupted.
//
// OpenPath (path.go) opens one attach path on its own, for compare and
// features.
package attach
