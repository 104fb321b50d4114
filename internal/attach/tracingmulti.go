package attach

// tracingmulti.go: the trampoline attach types of Linux 7.x that
// cilium/ebpf v0.22 cannot load or link. Delete this file, and use
// ebpf.ProgramSpec.AttachTo with link.AttachTracing, once cilium/ebpf
// resolves their targets and wraps their links.
//
//   BPF_TRACE_FSESSION (58)       one program at entry and exit of one
//                                 function; kernel merge "bpf-fsession-support"
//                                 (Menglong Dong, 7.0).
//   BPF_TRACE_FENTRY_MULTI (59),  one program, one link, many functions
//   BPF_TRACE_FEXIT_MULTI (60),   through their trampolines; "bpf: Add multi
//   BPF_TRACE_FSESSION_MULTI (61) tracing attach types" (Jiri Olsa, 7.x).
//
// Values and layouts below were read from the BTF of Debian's 7.3.4 arm64
// kernel (enum bpf_attach_type, union bpf_attr) and match
// include/uapi/linux/bpf.h of that release:
//
//   link_create { u32 prog_fd; u32 target_fd; u32 attach_type; u32 flags;
//                 union { struct { u32 target_btf_id; u64 cookie; } tracing;
//                         struct { u64 ids; u64 cookies; u32 cnt; } tracing_multi; }; }
//
// A multi program is loaded with attach_btf_id = 0 (the kernel sets it to
// bpf_multi_func and checks the targets at link time); an fsession program
// with attach_btf_id = its function, like fentry. Tracing multi links need
// CONFIG_HAVE_SINGLE_FTRACE_DIRECT_OPS: amd64 7.3 attaches them, arm64 7.3
// (per-callsite ftrace ops) returns EOPNOTSUPP at link creation. cilium/ebpf v0.22
// resolves attach_btf_id only for the attach types it knows ("Tracing
// programs must provide btf_id"), so these programs are loaded here with
// BPF_PROG_LOAD from the instructions of their ProgramSpec: maps and the
// kfuncs bpf_session_is_return/bpf_session_cookie are resolved here; the
// programs must not use CO-RE relocations or BPF-to-BPF calls (checked).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/ftprobe/ftprobe/internal/kfeat"
)

// Attach types of Linux 7.x (enum bpf_attach_type), unknown to cilium/ebpf
// v0.22 except FSESSION.
const (
	AttachTraceFSession      = ebpf.AttachType(58)
	AttachTraceFEntryMulti   = ebpf.AttachType(59)
	AttachTraceFExitMulti    = ebpf.AttachType(60)
	AttachTraceFSessionMulti = ebpf.AttachType(61)
)

// The trace programs loaded for the tracing multi links (one program,
// many functions): bpf/trace.bpf.c's ftp_fentry_multi, ftp_fexit_multi
// and ftp_fsession_multi. multiPrograms lists them with their attach
// types; specialize.SimplifyPrograms treats them as loaded for several
// functions (isMultiProgram).
const (
	progFEntryMulti   = "ftp_fentry_multi"
	progFExitMulti    = "ftp_fexit_multi"
	progFSessionMulti = "ftp_fsession_multi"
)

var multiPrograms = map[string]ebpf.AttachType{
	progFEntryMulti:   AttachTraceFEntryMulti,
	progFExitMulti:    AttachTraceFExitMulti,
	progFSessionMulti: AttachTraceFSessionMulti,
}

// isMultiProgram reports whether the program called name is one of
// multiPrograms.
func isMultiProgram(name string) bool {
	_, ok := multiPrograms[name]
	return ok
}

// MultiTarget is the target LoadTrampoline takes for the multi types: none.
// The kernel itself gives such a program the BTF id of bpf_multi_func and
// refuses (EINVAL) a load that names any attach_btf_id (seen on 7.3); the
// real targets come with the link.
const MultiTarget = ""

// ErrKernelPredates is wrapped by the errors of this file when the running
// kernel's BTF lacks the attach type (enum bpf_attach_type): the kernel is
// older than the feature. kfeat.Info.Reason names the release.
var ErrKernelPredates = kfeat.ErrKernelPredates

var attachTypeNames = map[ebpf.AttachType]string{
	AttachTraceFSession:      "BPF_TRACE_FSESSION",
	AttachTraceFEntryMulti:   "BPF_TRACE_FENTRY_MULTI",
	AttachTraceFExitMulti:    "BPF_TRACE_FEXIT_MULTI",
	AttachTraceFSessionMulti: "BPF_TRACE_FSESSION_MULTI",
}

const (
	sysBPFProgLoad   = 5  // BPF_PROG_LOAD
	sysBPFLinkCreate = 28 // BPF_LINK_CREATE
	progTypeTracing  = 26 // BPF_PROG_TYPE_TRACING
)

// progLoadAttr is union bpf_attr for BPF_PROG_LOAD up to log_true_size
// (stable uapi layout since 6.4).
type progLoadAttr struct {
	ProgType           uint32
	InsnCnt            uint32
	Insns              uint64
	License            uint64
	LogLevel           uint32
	LogSize            uint32
	LogBuf             uint64
	KernVersion        uint32
	ProgFlags          uint32
	ProgName           [16]byte
	ProgIfindex        uint32
	ExpectedAttachType uint32
	ProgBTFFd          uint32
	FuncInfoRecSize    uint32
	FuncInfo           uint64
	FuncInfoCnt        uint32
	LineInfoRecSize    uint32
	LineInfo           uint64
	LineInfoCnt        uint32
	AttachBTFID        uint32
	AttachBTFObjFd     uint32
	CoreReloCnt        uint32
	FdArray            uint64
	CoreRelos          uint64
	CoreReloRecSize    uint32
	LogTrueSize        uint32
}

// linkCreateTracingMulti is union bpf_attr for BPF_LINK_CREATE with
// tracing_multi (7.x); linkCreateTracing the same with tracing.
type linkCreateTracingMulti struct {
	ProgFd     uint32
	TargetFd   uint32
	AttachType uint32
	Flags      uint32
	IDs        uint64
	Cookies    uint64
	Cnt        uint32
	_          uint32
}

type linkCreateTracing struct {
	ProgFd      uint32
	TargetFd    uint32
	AttachType  uint32
	Flags       uint32
	TargetBTFID uint32
	_           uint32
	Cookie      uint64
}

func bpfSyscall(cmd uintptr, attr unsafe.Pointer, size uintptr) (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_BPF, cmd, uintptr(attr), size)
	if errno != 0 {
		return -1, errno
	}
	return int(r), nil
}

var (
	kernelAttachTypesOnce sync.Once
	kernelAttachTypes     map[string]bool
)

// KernelHasAttachType reports whether the running kernel's BTF names the
// attach type (e.g. "BPF_TRACE_FENTRY_MULTI") in enum bpf_attach_type. A
// missing name means the kernel predates it; a present one still needs a
// real attach to prove the mode works (JIT and arch support).
func KernelHasAttachType(name string) bool {
	kernelAttachTypesOnce.Do(func() {
		kernelAttachTypes = map[string]bool{}
		spec, err := btf.LoadKernelSpec()
		if err != nil {
			return
		}
		var e *btf.Enum
		if spec.TypeByName("bpf_attach_type", &e) != nil {
			return
		}
		for _, v := range e.Values {
			kernelAttachTypes[v.Name] = true
		}
	})
	return kernelAttachTypes[name]
}

// CheckAttachType returns nil when the kernel knows at, or an error
// wrapping ErrKernelPredates.
func CheckAttachType(at ebpf.AttachType) error {
	name := attachTypeNames[at]
	if name == "" || KernelHasAttachType(name) {
		return nil
	}
	return fmt.Errorf("%s: %w", name, ErrKernelPredates)
}

// LoadTrampoline loads ps as a BPF_PROG_TYPE_TRACING program with expected
// attach type at and attach_btf_id = the vmlinux BTF id of target (a
// function name; MultiTarget, no id, for the multi types). maps resolves the map
// references of ps by name (".rodata" included). The caller must Close the
// program. Errors: ErrKernelPredates when the kernel lacks at; an
// *ebpf.VerifierError (with the log) when the verifier rejects it; the
// errno otherwise. Minimum kernel: 7.0 (fsession), 7.x (multi types).
func LoadTrampoline(ps *ebpf.ProgramSpec, at ebpf.AttachType, target string, maps map[string]*ebpf.Map, ids *FuncIDs) (*ebpf.Program, error) {
	if err := CheckAttachType(at); err != nil {
		return nil, err
	}
	var targetID btf.TypeID
	if target != "" {
		id, err := ids.ID(target)
		if err != nil {
			return nil, err
		}
		targetID = id
	}
	fders := make(map[string]asm.FDer, len(maps))
	for k, v := range maps {
		fders[k] = v
	}
	code, err := trampolineCode(ps, fders, ids)
	if err != nil {
		return nil, err
	}
	license := []byte("GPL\x00")
	attr := progLoadAttr{
		ProgType:           progTypeTracing,
		InsnCnt:            uint32(len(code) / asm.InstructionSize),
		Insns:              uint64(uintptr(unsafe.Pointer(&code[0]))),
		License:            uint64(uintptr(unsafe.Pointer(&license[0]))),
		ExpectedAttachType: uint32(at),
		AttachBTFID:        uint32(targetID),
	}
	copy(attr.ProgName[:15], ps.Name)
	fd, err := bpfSyscall(sysBPFProgLoad, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if err != nil && !errors.Is(err, unix.EPERM) {
		// Load again with the verifier log, to say why.
		log := make([]byte, 4<<20)
		attr.LogLevel = 1
		attr.LogSize = uint32(len(log))
		attr.LogBuf = uint64(uintptr(unsafe.Pointer(&log[0])))
		if fd2, err2 := bpfSyscall(sysBPFProgLoad, unsafe.Pointer(&attr), unsafe.Sizeof(attr)); err2 == nil {
			fd, err = fd2, nil // loaded the second time (a transient failure)
		} else if n := bytes.IndexByte(log, 0); n > 0 {
			lines := strings.Split(strings.TrimSpace(string(log[:n])), "\n")
			err = &ebpf.VerifierError{Cause: err2, Log: lines}
		}
		runtime.KeepAlive(log)
	}
	runtime.KeepAlive(code)
	runtime.KeepAlive(license)
	if err != nil {
		return nil, fmt.Errorf("load %s as %s: %w", ps.Name, attachTypeNames[at], err)
	}
	prog, err := ebpf.NewProgramFromFD(fd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return prog, nil
}

// trampolineCode resolves the map references (to maps' fds) and kfunc
// calls (to vmlinux BTF ids) of ps and returns its bytecode.
func trampolineCode(ps *ebpf.ProgramSpec, maps map[string]asm.FDer, ids *FuncIDs) ([]byte, error) {
	insns := make(asm.Instructions, len(ps.Instructions))
	copy(insns, ps.Instructions)
	for i := range insns {
		ins := &insns[i]
		if btf.CORERelocationMetadata(ins) != nil {
			return nil, fmt.Errorf("program %s: CO-RE relocations are not supported by the trampoline loader", ps.Name)
		}
		switch {
		case ins.IsLoadFromMap():
			m := maps[ins.Reference()]
			if m == nil {
				return nil, fmt.Errorf("program %s: no map %q", ps.Name, ins.Reference())
			}
			if err := ins.AssociateMap(m); err != nil {
				return nil, err
			}
		case ins.IsKfuncCall():
			id, err := ids.ID(ins.Reference())
			if err != nil {
				return nil, fmt.Errorf("program %s: kfunc: %w", ps.Name, err)
			}
			*ins = ins.WithReference("")
			ins.Constant = int64(id)
			ins.Offset = 0 // vmlinux BTF
		case ins.IsFunctionReference() && !ins.IsFunctionCall():
			// (BPF-to-BPF calls, to xpred, the compiled --filter,
			// are resolved by Marshal; without func_info the kernel
			// verifies the subprogram as a static one.)
			return nil, fmt.Errorf("program %s: function pointers are not supported by the trampoline loader", ps.Name)
		}
	}
	var buf bytes.Buffer
	bo := ps.ByteOrder
	if bo == nil {
		bo = binary.LittleEndian // the bpfel objects of both targets
	}
	if err := insns.Marshal(&buf, bo); err != nil {
		return nil, fmt.Errorf("program %s: %w", ps.Name, err)
	}
	return buf.Bytes(), nil
}

// AttachTracingMulti creates one tracing multi link (BPF_LINK_TYPE_TRACING_MULTI)
// of prog, loaded by LoadTrampoline with at, to the vmlinux functions ids
// (BTF type ids), each with its cookie (bpf_get_attach_cookie). The caller
// must Close the link. Errors are the kernel's errno (E2BIG, EINVAL for a
// function without a trampoline, EBUSY, ...) or ErrKernelPredates.
// Minimum kernel: 7.x.
func AttachTracingMulti(prog *ebpf.Program, at ebpf.AttachType, ids []btf.TypeID, cookies []uint64) (link.Link, error) {
	if err := CheckAttachType(at); err != nil {
		return nil, err
	}
	if len(ids) == 0 || len(cookies) != len(ids) {
		return nil, fmt.Errorf("tracing multi link: %d ids, %d cookies", len(ids), len(cookies))
	}
	raw := make([]uint32, len(ids))
	for i, id := range ids {
		raw[i] = uint32(id)
	}
	attr := linkCreateTracingMulti{
		ProgFd:     uint32(prog.FD()),
		AttachType: uint32(at),
		IDs:        uint64(uintptr(unsafe.Pointer(&raw[0]))),
		Cookies:    uint64(uintptr(unsafe.Pointer(&cookies[0]))),
		Cnt:        uint32(len(ids)),
	}
	fd, err := bpfSyscall(sysBPFLinkCreate, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	runtime.KeepAlive(raw)
	runtime.KeepAlive(cookies)
	runtime.KeepAlive(prog)
	if err != nil {
		return nil, fmt.Errorf("create %s link for %d functions: %w", attachTypeNames[at], len(ids), err)
	}
	return wrapLinkFD(fd)
}

// AttachFSession links an fsession program (LoadTrampoline with
// AttachTraceFSession) to the function it was loaded for, with cookie
// (bpf_get_attach_cookie). The caller must Close the link. Minimum kernel:
// 7.0 (x86-64 and arm64 JITs).
func AttachFSession(prog *ebpf.Program, cookie uint64) (link.Link, error) {
	if err := CheckAttachType(AttachTraceFSession); err != nil {
		return nil, err
	}
	attr := linkCreateTracing{ProgFd: uint32(prog.FD()), AttachType: uint32(AttachTraceFSession), Cookie: cookie}
	fd, err := bpfSyscall(sysBPFLinkCreate, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	runtime.KeepAlive(prog)
	if err != nil {
		return nil, fmt.Errorf("create BPF_TRACE_FSESSION link: %w", err)
	}
	return wrapLinkFD(fd)
}

func wrapLinkFD(fd int) (link.Link, error) {
	l, err := link.NewFromFD(fd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return l, nil
}

// FuncIDs resolves function names to vmlinux BTF type ids. It is safe for
// concurrent use (a btf.Spec is not).
type FuncIDs struct {
	mu    sync.Mutex
	spec  *btf.Spec
	cache map[string]btf.TypeID
}

// NewFuncIDs reads the running kernel's vmlinux BTF
// (/sys/kernel/btf/vmlinux) through cache.
func NewFuncIDs(cache *btf.Cache) (*FuncIDs, error) {
	spec, err := cache.Kernel()
	if err != nil {
		return nil, fmt.Errorf("vmlinux BTF: %w", err)
	}
	return newFuncIDs(spec), nil
}

func newFuncIDs(spec *btf.Spec) *FuncIDs {
	return &FuncIDs{spec: spec, cache: map[string]btf.TypeID{}}
}

// ID returns the BTF id of the vmlinux function name. Errors wrap
// btf.ErrNotFound (no such function) or btf.ErrMultipleMatches (a static
// name BTF holds more than once: naming it by id would be a guess).
func (r *FuncIDs) ID(name string) (btf.TypeID, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.cache[name]; ok {
		return id, nil
	}
	var fn *btf.Func
	if err := r.spec.TypeByName(name, &fn); err != nil {
		return 0, fmt.Errorf("vmlinux BTF function %s: %w", name, err)
	}
	id, err := r.spec.TypeID(fn)
	if err != nil {
		return 0, err
	}
	r.cache[name] = id
	return id, nil
}
