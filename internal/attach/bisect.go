package attach

import (
	"context"
	"errors"
	"sort"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Bisect attaches fs with try; when the whole set fails, it splits it to
// find the functions the kernel refuses, and attaches the rest in one
// link. It returns the attached functions, the refused ones with their
// errors and the link. err is set when nothing could be attached (the
// error of the whole set). A set of n functions with b bad ones costs
// O(b log n) attempts. Once ctx is done (nil: never) it tries no more
// and returns context.Cause(ctx), nothing attached.
func Bisect(ctx context.Context, fs []*symbols.Func, try func([]*symbols.Func) (link.Link, error)) (good []*symbols.Func, bad []Failure, l link.Link, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	l, err = try(fs)
	if err == nil {
		return fs, nil, l, nil
	}
	whole := err
	if errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EOPNOTSUPP) ||
		errors.Is(err, unix.Errno(524)) || errors.Is(err, kfeat.ErrKernelPredates) {
		return nil, nil, nil, err // the mode itself is missing: bisection cannot help
	}
	var find func([]*symbols.Func)
	find = func(set []*symbols.Func) {
		if len(set) == 0 || ctx.Err() != nil {
			return
		}
		tl, terr := try(set)
		if terr == nil {
			tl.Close()
			good = append(good, set...)
			return
		}
		if len(set) == 1 {
			bad = append(bad, Failure{set[0], terr})
			return
		}
		find(set[:len(set)/2])
		find(set[len(set)/2:])
	}
	find(fs)
	if ctx.Err() != nil {
		return nil, bad, nil, context.Cause(ctx)
	}
	if len(good) == 0 {
		return nil, bad, nil, whole
	}
	sort.Slice(good, func(i, j int) bool { return good[i].ID < good[j].ID })
	l, err = try(good)
	if err != nil {
		return nil, bad, nil, err
	}
	return good, bad, l, nil
}
