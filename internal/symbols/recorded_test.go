package symbols

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordedKernels are the lab kernels whose fixtures must be present
// (recorded with `ftprobe internal-record-symbols`, see README, Tests).
var recordedKernels = []string{"arm64-7.3", "amd64-7.3", "arm64-6.12"}

// fixture is one recorded kernel with what the tests discover from it.
type fixture struct {
	k    *Kernel
	meta *RecordedMeta
}

func loadFixture(t *testing.T, name string) fixture {
	t.Helper()
	k, meta, err := LoadRecorded(filepath.Join("testdata", name))
	require.NoError(t, err)
	require.NotEmpty(t, k.Syms)
	require.Equal(t, strings.SplitN(name, "-", 2)[0], meta.Arch)
	require.True(t, strings.HasPrefix(meta.Release, strings.SplitN(name, "-", 2)[1]+"."), meta.Release)
	return fixture{k, meta}
}

// eachKernel runs fn once per recorded kernel.
func eachKernel(t *testing.T, fn func(t *testing.T, fx fixture)) {
	for _, name := range recordedKernels {
		t.Run(name, func(t *testing.T) { fn(t, loadFixture(t, name)) })
	}
}

// rawProto is the recorded BTF prototype of name, read without ProtoFromBTF.
func (fx fixture) rawProto(name, mod string) *btf.FuncProto {
	fn, err := fx.k.BTF(BaseName(name), mod)
	if err != nil {
		return nil
	}
	fp, _ := fn.Type.(*btf.FuncProto)
	return fp
}

func (fx fixture) traceable(s Sym) bool {
	return fx.k.Filter[FilterKey{s.Name, s.Module}] > 0 && Denied(s.Name) == ""
}

// plain lists the distinct vmlinux names in available_filter_functions, not
// deny-listed, without compiler suffix, with a BTF prototype, whose
// prototype satisfies keep.
func (fx fixture) plain(keep func(name string, fp *btf.FuncProto) bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range fx.k.Syms {
		if s.Module != "" || seen[s.Name] || IsSuffixedCopy(s.Name) || !fx.traceable(s) {
			continue
		}
		seen[s.Name] = true
		if fp := fx.rawProto(s.Name, ""); fp != nil && keep(s.Name, fp) {
			out = append(out, s.Name)
		}
	}
	return out
}

func rawVarargs(fp *btf.FuncProto) bool {
	if n := len(fp.Params); n > 0 {
		last := fp.Params[n-1]
		_, void := last.Type.(*btf.Void)
		return last.Type == nil || (last.Name == "" && void)
	}
	return false
}

func rawByValue(fp *btf.FuncProto) bool {
	for _, p := range fp.Params {
		switch btf.UnderlyingType(p.Type).(type) {
		case *btf.Struct, *btf.Union:
			return true
		}
	}
	return false
}

func (fx fixture) addrs(name, mod string) []uint64 {
	var out []uint64
	for _, s := range fx.k.Syms {
		if s.Name == name && s.Module == mod {
			out = append(out, s.Addr)
		}
	}
	return out
}

func TestRecordedFixedFunctions(t *testing.T) {
	eachKernel(t, func(t *testing.T, fx fixture) {
		r, err := fx.k.Resolve([]string{"do_sys_openat2", "vfs_read", "ksys_read"}, nil, ModeFentryFexit, 0)
		require.NoError(t, err)
		require.Len(t, r.Funcs, 3)
		for i, name := range []string{"do_sys_openat2", "vfs_read", "ksys_read"} {
			f := r.Funcs[i]
			assert.Equal(t, name, f.Name)
			assert.EqualValues(t, i, f.ID)
			assert.Equal(t, fx.addrs(name, ""), []uint64{f.Addr})
			require.NotNil(t, f.Proto, name)
			assert.Len(t, f.Proto.Params, len(fx.rawProto(name, "").Params), name)
		}
		// do_sys_openat2 returns long on some 7.3 builds and int on others.
		wantRet := map[uint32]RetKind{4: RetS32, 8: RetLong}[btf.UnderlyingType(fx.rawProto("do_sys_openat2", "").Return).(*btf.Int).Size]
		assert.Equal(t, wantRet, r.Funcs[0].Proto.RetKind)
		assert.Equal(t, ArgInt, r.Funcs[0].Proto.Params[0].Kind)
		assert.Equal(t, ArgCharPtr, r.Funcs[0].Proto.Params[1].Kind)
		assert.Equal(t, "ssize_t", r.Funcs[1].Proto.Ret)
		assert.Equal(t, []string{"file", "buf", "count", "pos"}, []string{r.Funcs[1].Proto.Params[0].Name, r.Funcs[1].Proto.Params[1].Name, r.Funcs[1].Proto.Params[2].Name, r.Funcs[1].Proto.Params[3].Name})
		assert.Equal(t, "struct file *", r.Funcs[1].Proto.Params[0].Type)
		// A glob over the recorded vfs_* functions, and the function limit.
		r, err = fx.k.Resolve([]string{"vfs_*"}, nil, ModeKprobeMulti, 0)
		require.NoError(t, err)
		assert.Len(t, r.Funcs, 2)
		_, err = fx.k.Resolve([]string{"vfs_*"}, nil, ModeKprobeMulti, 1)
		assert.ErrorIs(t, err, ErrTooMany)
		_, err = fx.k.Resolve([]string{"do_sys_openat"}, nil, ModeFentryFexit, 0)
		require.ErrorIs(t, err, ErrNoMatch)
		assert.ErrorContains(t, err, "did you mean do_sys_openat2")
		// Every match excluded, and a wildcard matching nothing, say so.
		_, err = fx.k.Resolve([]string{"vfs_read"}, []string{"vfs_*"}, ModeFentryFexit, 0)
		require.ErrorIs(t, err, ErrNoMatch)
		assert.ErrorContains(t, err, `"vfs_read": it matches 1 kallsyms entries, but --exclude vfs_* removed every one`)
		_, err = fx.k.Resolve([]string{"nosuchfn_*"}, nil, ModeFentryFexit, 0)
		require.ErrorIs(t, err, ErrNoMatch)
		assert.ErrorContains(t, err, `"nosuchfn_*": the pattern matches nothing in kallsyms`)
		// A pattern covered by an earlier one adds nothing and is no error.
		r, err = fx.k.Resolve([]string{"vfs_*", "vfs_read"}, nil, ModeKprobeMulti, 0)
		require.NoError(t, err)
		assert.Len(t, r.Funcs, 2)
		fs, err := fx.k.Match([]string{"vfs_read", "vfs_read"}, nil)
		require.NoError(t, err)
		assert.Len(t, fs, 1)
		_, err = fx.k.Resolve([]string{"vfs_read"}, []string{"do_*", "vfs_r*"}, ModeFentryFexit, 0)
		assert.ErrorContains(t, err, "--exclude vfs_r* removed every one", "names only the exclude that matched")
	})
}

func TestRecordedDuplicates(t *testing.T) {
	eachKernel(t, func(t *testing.T, fx fixture) {
		dups := fx.plain(func(name string, fp *btf.FuncProto) bool { return len(fx.addrs(name, "")) > 1 })
		require.NotEmpty(t, dups, "no duplicated static name recorded")
		for _, name := range dups {
			addrs := fx.addrs(name, "")
			r, err := fx.k.Resolve([]string{name}, nil, ModeKprobeMulti, 0)
			require.NoError(t, err, name)
			require.Len(t, r.Funcs, len(addrs), "%s: kprobe.multi attaches every copy", name)
			for i, f := range r.Funcs {
				assert.Equal(t, addrs[i], f.Addr)
				assert.Equal(t, len(addrs), f.Copies)
				assert.Equal(t, fmt.Sprintf("%s@%#x", name, addrs[i]), f.Display())
			}
			// fentry attaches by name: the kernel resolves the lowest
			// address; the other copies are refused and say which copy a
			// trampoline gets, and the fprobe modes take them.
			r, err = fx.k.Resolve([]string{name}, nil, ModeFentryFexit, 0)
			require.NoError(t, err, name)
			require.Len(t, r.Funcs, 1, "%s: fentry attaches one copy by BTF id", name)
			low := slices.Min(addrs)
			assert.Equal(t, low, r.Funcs[0].Addr, "the lowest address")
			require.Len(t, r.Skipped, len(addrs)-1)
			for _, f := range r.Skipped {
				assert.Equal(t, fmt.Sprintf("another copy: a trampoline attaches by name to the copy the kernel resolves (%s@%#x, the lowest address), not this one", name, low), f.Skip[ModeFentryFexit])
				assert.Equal(t, fmt.Sprintf("--mode kprobe.session, kprobe.multi+kretprobe.multi or kprobe+kretprobe takes it (%s@%#x selects this copy only)", name, f.Addr), fx.k.Fix(f, ModeFentryFexit))
			}
			last := addrs[len(addrs)-1]
			r, err = fx.k.Resolve([]string{fmt.Sprintf("%s@%x", name, last)}, nil, ModeKprobeMulti, 0)
			require.NoError(t, err, name)
			require.Len(t, r.Funcs, 1)
			assert.Equal(t, last, r.Funcs[0].Addr)
		}
	})
}

func TestRecordedCompilerCopies(t *testing.T) {
	eachKernel(t, func(t *testing.T, fx fixture) {
		for _, suf := range []string{".isra.", ".constprop.", ".part."} {
			var copies []Sym
			for _, s := range fx.k.Syms {
				if s.Module == "" && strings.Contains(s.Name, suf) && fx.traceable(s) && fx.rawProto(s.Name, "") != nil {
					copies = append(copies, s)
				}
			}
			require.NotEmpty(t, copies, "no %s copy recorded", suf)
			for _, c := range copies {
				base := BaseName(c.Name)
				// The exact copy name: kprobe.multi traces it, fentry refuses it.
				r, err := fx.k.Resolve([]string{c.Name}, nil, ModeKprobeMulti, 0)
				require.NoError(t, err, c.Name)
				assert.Equal(t, c.Addr, r.Funcs[0].Addr)
				_, err = fx.k.Resolve([]string{c.Name}, nil, ModeFentryFexit, 0)
				require.ErrorIs(t, err, ErrUntraceable, c.Name)
				assert.ErrorContains(t, err, "compiler copy without BTF of its own ("+c.Name)
				// The base name finds the copy, with the original's BTF.
				fs, err := fx.k.Match([]string{base}, nil)
				require.NoError(t, err, base)
				var got *Func
				for _, f := range fs {
					if f.Name == c.Name {
						got = f
					}
				}
				require.NotNil(t, got, "%s does not find %s", base, c.Name)
				assert.Equal(t, base, got.BTFName)
				assert.Empty(t, got.Skip[ModeKprobeMulti])
				r, err = fx.k.Resolve([]string{base}, nil, ModeKprobeMulti, 0)
				require.NoError(t, err, base)
				if len(fx.addrs(base, "")) > 0 {
					for _, f := range r.Funcs {
						assert.Equal(t, base, f.Name, "an exact name prefers the original over its copies")
					}
				} else {
					var names []string
					for _, f := range r.Funcs {
						names = append(names, f.Name)
					}
					assert.Contains(t, names, c.Name)
					assert.Contains(t, strings.Join(r.Notes, "\n"), base+": traced as compiler copy "+c.Name)
				}
			}
		}
	})
}

// skipsFentryOnly asserts that name is skipped in fentry+fexit mode (and the
// other trampoline modes) with want, and traceable with kprobe.multi.
func skipsFentryOnly(t *testing.T, fx fixture, name, want string) {
	t.Helper()
	fs, err := fx.k.Match([]string{name}, nil)
	require.NoError(t, err, name)
	for _, f := range fs {
		if f.Name != name {
			continue
		}
		assert.Contains(t, f.Skip[ModeFentryFexit], want, name)
		assert.Equal(t, f.Skip[ModeFentryFexit], f.Skip[ModeFSession], name)
		assert.Equal(t, f.Skip[ModeFentryFexit], f.Skip[ModeFSessionMulti], name)
		assert.Equal(t, f.Skip[ModeFentryFexit], f.Skip[ModeFentryMulti], name)
		assert.Empty(t, f.Skip[ModeKprobeMulti], name)
		assert.Empty(t, f.Skip[ModeKprobeSession], name)
		assert.Empty(t, f.Skip[ModeKprobe], name)
	}
	_, err = fx.k.Resolve([]string{name}, nil, ModeFentryFexit, 0)
	require.ErrorIs(t, err, ErrUntraceable, name)
	assert.ErrorContains(t, err, want)
	_, err = fx.k.Resolve([]string{name}, nil, ModeKprobeMulti, 0)
	assert.NoError(t, err, name)
}

// rawStructSize is the largest struct or union fp takes by value (0: none)
// and the first parameter of that size.
func rawStructSize(fp *btf.FuncProto) (uint32, string) {
	var m uint32
	name := ""
	for _, p := range fp.Params {
		switch u := btf.UnderlyingType(p.Type).(type) {
		case *btf.Struct, *btf.Union:
			if sz, _ := btf.Sizeof(u); uint32(sz) > m {
				m, name = uint32(sz), p.Name
			}
		}
	}
	return m, name
}

// limitSets are the trampoline limits the prototype tests run under: the
// rule each fixture was recorded with (arm64 8 arguments and no struct by
// value, as ftprobe assumed before trials), and what trials measured on
// arm64 7.3.4 (12 arguments, structs up to 16 bytes). The verdicts must
// follow the limits given, in both directions.
func limitSets(fx fixture) map[string]RuleLimits {
	return map[string]RuleLimits{
		"recorded": {MaxArgs: fx.meta.MaxArgs, MaxStruct: fx.meta.MaxStruct, Rule: "the recorded rule"},
		"measured": {MaxArgs: 12, MaxStruct: 16, Rule: "the kernel accepted a trial trampoline"},
	}
}

func TestRecordedPrototypeLimits(t *testing.T) {
	accepted := map[string]int{} // limit set and rule -> functions the limits let through
	refused := map[string]int{}
	eachKernel(t, func(t *testing.T, fx fixture) {
		for set, lim := range limitSets(fx) {
			fx.k.Limits = lim
			ok := func(fp *btf.FuncProto) bool { return !rawVarargs(fp) && !rawByValue(fp) }
			above := fx.plain(func(name string, fp *btf.FuncProto) bool {
				return ok(fp) && len(fp.Params) > lim.MaxArgs && !noreturn[name]
			})
			require.NotEmpty(t, above, "no function above the %d-argument limit recorded", lim.MaxArgs)
			for _, name := range above {
				skipsFentryOnly(t, fx, name, fmt.Sprintf("too many arguments for a trampoline (%d arguments; %s: at most %d arguments)", len(fx.rawProto(name, "").Params), lim.Rule, lim.MaxArgs))
			}
			refused[set+" args"] += len(above)
			within := fx.plain(func(name string, fp *btf.FuncProto) bool {
				return ok(fp) && len(fp.Params) > 6 && len(fp.Params) <= lim.MaxArgs && !noreturn[name] && len(fx.addrs(name, "")) == 1
			})
			require.NotEmpty(t, within, "no function with 7..%d arguments recorded", lim.MaxArgs)
			r, err := fx.k.Resolve(within, nil, ModeFentryFexit, 0)
			require.NoError(t, err, "within the limit, fentry takes them")
			assert.Len(t, r.Funcs, len(within))
			accepted[set+" args"] += len(within)

			varargs := fx.plain(func(_ string, fp *btf.FuncProto) bool { return rawVarargs(fp) })
			require.NotEmpty(t, varargs, "no varargs function recorded")
			for _, name := range varargs {
				skipsFentryOnly(t, fx, name, "varargs prototype")
			}
			byValue := fx.plain(func(name string, fp *btf.FuncProto) bool {
				return !rawVarargs(fp) && rawByValue(fp) && len(fp.Params) <= 6 && !noreturn[name]
			})
			require.NotEmpty(t, byValue, "no struct-by-value function recorded")
			for _, name := range byValue {
				size, param := rawStructSize(fx.rawProto(name, ""))
				if size > lim.MaxStruct {
					skipsFentryOnly(t, fx, name, fmt.Sprintf("struct passed by value (%s, %d bytes; %s", param, size, lim.Rule))
					refused[set+" struct"]++
					continue
				}
				r, err := fx.k.Resolve([]string{name}, nil, ModeFentryFexit, 0)
				require.NoError(t, err, "%s: a %d-byte struct by value is within %d bytes", name, size, lim.MaxStruct)
				assert.Empty(t, r.Funcs[0].Skip[ModeFSession], name)
				accepted[set+" struct"]++
			}
		}
	})
	// Each limit set decided each way somewhere: the old rule refuses every
	// struct by value, the measured one takes the small ones.
	assert.Zero(t, accepted["recorded struct"])
	assert.Positive(t, refused["recorded struct"])
	assert.Positive(t, accepted["measured struct"])
	assert.Positive(t, refused["measured struct"], "a struct above 16 bytes (arm64 va_list) is refused")
	assert.Positive(t, accepted["measured args"])
	assert.Positive(t, refused["measured args"])
	assert.Greater(t, accepted["measured args"], accepted["recorded args"], "12 arguments let more functions through than 8")
}

func TestRecordedNoreturnDenyNotrace(t *testing.T) {
	eachKernel(t, func(t *testing.T, fx fixture) {
		nr := fx.plain(func(name string, fp *btf.FuncProto) bool {
			return noreturn[name] && !rawVarargs(fp) && !rawByValue(fp) && len(fp.Params) <= fx.meta.MaxArgs
		})
		require.NotEmpty(t, nr, "no noreturn function recorded")
		for _, name := range nr {
			// Traced at entry only, in every mode.
			for _, mode := range []string{ModeFentryFexit, ModeKprobeMulti, ModeKprobe, ModeFSession, ModeFentryMulti} {
				r, err := fx.k.Resolve([]string{name}, nil, mode, 0)
				require.NoError(t, err, "%s in %s mode", name, mode)
				require.NotEmpty(t, r.Funcs, name)
				for _, f := range r.Funcs {
					assert.Equal(t, EntryOnlyNoreturn, f.EntryOnly, "%s in %s mode", name, mode)
				}
				assert.Equal(t, "entry only: "+r.Funcs[0].Display()+" (noreturn)", EntryOnlySummary(r.Funcs[:1]))
			}
		}
		r, err := fx.k.Resolve([]string{"vfs_read"}, nil, ModeFentryFexit, 0)
		require.NoError(t, err)
		assert.Empty(t, r.Funcs[0].EntryOnly, "vfs_read returns")
		assert.Empty(t, EntryOnlySummary(r.Funcs))
		seen := map[string]bool{}
		var denied, notrace []string
		for _, s := range fx.k.Syms {
			if seen[s.Name] || s.Module != "" || IsSuffixedCopy(s.Name) {
				continue
			}
			seen[s.Name] = true
			switch {
			case fx.k.Filter[FilterKey{s.Name, ""}] == 0:
				notrace = append(notrace, s.Name)
			case Denied(s.Name) != "":
				denied = append(denied, s.Name)
			}
		}
		require.NotEmpty(t, denied, "no deny-listed function recorded")
		require.NotEmpty(t, notrace, "no function missing from available_filter_functions recorded")
		for _, name := range denied {
			for _, mode := range []string{ModeFentryFexit, ModeKprobeMulti, ModeKprobe, ModeFSession, ModeFentryMulti} {
				_, err := fx.k.Resolve([]string{name}, nil, mode, 0)
				require.ErrorIs(t, err, ErrUntraceable, name)
				assert.ErrorContains(t, err, "deny-listed ("+Denied(name))
			}
		}
		for _, name := range notrace {
			_, err := fx.k.Resolve([]string{name}, nil, ModeKprobeMulti, 0)
			require.ErrorIs(t, err, ErrUntraceable, name)
			assert.ErrorContains(t, err, "not in available_filter_functions")
		}
		// A glob over everything counts every reason.
		r, err = fx.k.Resolve([]string{"*"}, nil, ModeFentryFexit, 0)
		require.NoError(t, err)
		var reasons []string
		for k := range r.Reasons {
			reasons = append(reasons, k)
		}
		sort.Strings(reasons)
		for _, want := range []string{"deny-listed", "not in available_filter_functions", "varargs prototype", "struct passed by value", "compiler copy without BTF of its own"} {
			assert.Contains(t, r.SkipSummary(), want)
		}
		assert.NotContains(t, r.SkipSummary(), "noreturn")
		for _, f := range r.Funcs {
			assert.Empty(t, f.Skip[ModeFentryFexit], f.Name)
		}
	})
}

func TestRecordedModules(t *testing.T) {
	eachKernel(t, func(t *testing.T, fx fixture) {
		var mods []Sym
		for _, s := range fx.k.Syms {
			if s.Module != "" && fx.traceable(s) && !IsSuffixedCopy(s.Name) && fx.rawProto(s.Name, s.Module) != nil {
				mods = append(mods, s)
			}
		}
		require.NotEmpty(t, mods, "no module function recorded (record with --load-module)")
		for _, s := range mods {
			r, err := fx.k.Resolve([]string{s.Name + " [" + s.Module + "]"}, nil, ModeFentryFexit, 0)
			require.NoError(t, err, s.Name)
			assert.Equal(t, s.Name+" ["+s.Module+"]", r.Funcs[0].Display())
			assert.Equal(t, s.Name, r.Funcs[0].BTFName)
			r, err = fx.k.Resolve([]string{s.Module + ":" + s.Name[:len(s.Name)/2] + "*"}, nil, ModeKprobeMulti, 0)
			require.NoError(t, err, s.Name)
			for _, f := range r.Funcs {
				assert.Equal(t, s.Module, f.Module)
			}
			assert.Contains(t, r.Funcs[0].Skip, ModeFSession)
			fs, err := fx.k.Match([]string{s.Name + " [" + s.Module + "]"}, nil)
			require.NoError(t, err)
			assert.Contains(t, fs[0].Skip[ModeFSession], "module function")
			assert.Contains(t, fs[0].Skip[ModeFentryMulti], "module function")
			_, err = fx.k.Resolve([]string{s.Name + " [no_such_module]"}, nil, ModeKprobeMulti, 0)
			assert.ErrorIs(t, err, ErrNoMatch, s.Name)
			_, err = fx.k.Resolve([]string{"no_such_module:" + s.Name}, nil, ModeKprobeMulti, 0)
			assert.ErrorIs(t, err, ErrNoMatch, s.Name)
		}
	})
}

// TestRecordedFix: a refused function says what would make it traceable
// where that is known, and nothing where no mode takes it.
func TestRecordedFix(t *testing.T) {
	eachKernel(t, func(t *testing.T, fx fixture) {
		var cp, mod, denied *Func
		fs, err := fx.k.Match([]string{"*"}, nil)
		require.NoError(t, err)
		for _, f := range fs {
			switch {
			case cp == nil && f.Module == "" && IsSuffixedCopy(f.Name) && f.Skip[ModeKprobeMulti] == "" && fx.k.Copies(BaseName(f.Name), "") > 0 && f.BTFName != "":
				cp = f
			case mod == nil && f.Module != "" && f.Skip[ModeFentryFexit] == "" && f.Skip[ModeFSession] != "":
				mod = f
			case denied == nil && Denied(f.Name) != "":
				denied = f
			}
		}
		require.NotNil(t, cp, "a compiler copy whose original is in kallsyms")
		assert.Equal(t, "trace the original "+BaseName(cp.Name)+" (its own BTF) in fentry+fexit mode; --mode kprobe.session, kprobe.multi+kretprobe.multi or kprobe+kretprobe takes it", fx.k.Fix(cp, ModeFentryFexit))
		assert.Empty(t, fx.k.Fix(cp, ModeKprobeMulti), "kprobe.multi+kretprobe.multi takes it: nothing to fix")
		require.NotNil(t, mod, "a module function")
		assert.Equal(t, "--mode fentry+fexit, kprobe.session, kprobe.multi+kretprobe.multi or kprobe+kretprobe takes it", fx.k.Fix(mod, ModeFSession))
		require.NotNil(t, denied)
		assert.Empty(t, fx.k.Fix(denied, ModeFentryFexit), "no mode takes a deny-listed function")
	})
}
