package symbols

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A kallsyms excerpt as the arm64 7.3 lab kernel shows it while ftprobe's
// fentry program on vfs_read is attached: vmlinux, a module, the BPF
// program and its trampoline (module "bpf"), in kallsyms order (modules
// and BPF below vmlinux).
const stackKallsyms = `ffff800080010000 T _text
ffff8000803a8318 T vfs_read
ffff8000803a8650 T vfs_readv
ffff8000803b0010 T ksys_read
ffff8000803b0180 T __arm64_sys_read
ffff8000803f0000 D some_data
ffff800000a10000 t ext4_file_read_iter	[ext4]
ffff800000a12000 t ext4_llseek	[ext4]
ffff800081250000 t bpf_prog_6deef7357e7b4530_ftp_fentry	[bpf]
ffff800081251000 t bpf_trampoline_6442520123	[bpf]
`

func TestSymbolizer(t *testing.T) {
	syms, err := ParseKallsyms(strings.NewReader(stackKallsyms))
	require.NoError(t, err)
	s := NewSymbolizer(syms)
	for addr, want := range map[uint64]string{
		0xffff800081250064: "bpf_prog_6deef7357e7b4530_ftp_fentry+0x64 [bpf]",
		0xffff800081251090: "bpf_trampoline_6442520123+0x90 [bpf]",
		0xffff8000803a8320: "vfs_read+0x8",
		0xffff8000803b006c: "ksys_read+0x5c",
		0xffff8000803b01a4: "__arm64_sys_read+0x24",
		0xffff800000a10124: "ext4_file_read_iter+0x124 [ext4]",
		// A return address right after a call that ends vfs_read belongs
		// to vfs_read (addr-1 lookup), not to vfs_readv.
		0xffff8000803a8647: "vfs_read+0x32f",
		// Exactly a symbol's start: a kprobe's pc at entry.
		0xffff8000803a8318: "vfs_read+0x0",
		0xffff800000000010: "0xffff800000000010", // below every symbol
		0xffff9000803b0000: "0xffff9000803b0000", // far above the last one
	} {
		assert.Equal(t, want, s.Symbolize(addr), "%#x", addr)
	}
	// Cached: the same answer from the cache.
	assert.Equal(t, "ksys_read+0x5c", s.Symbolize(0xffff8000803b006c))
	assert.Len(t, s.cache, 10)
}

func TestEnumParams(t *testing.T) {
	pidType := &btf.Enum{Name: "pid_type", Size: 4, Values: []btf.EnumValue{{Name: "PIDTYPE_PID", Value: 0}, {Name: "PIDTYPE_TGID", Value: 1}}}
	boolT := &btf.Int{Name: "_Bool", Size: 1, Encoding: btf.Bool}
	fn := &btf.Func{Name: "f", Type: &btf.FuncProto{Return: &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed},
		Params: []btf.FuncParam{{Name: "type", Type: &btf.Typedef{Name: "pid_type_t", Type: pidType}}, {Name: "force", Type: boolT}}}}
	p, err := ProtoFromBTF(fn)
	require.NoError(t, err)
	assert.Equal(t, ArgEnum, p.Params[0].Kind)
	assert.Equal(t, []EnumValue{{"PIDTYPE_PID", 0}, {"PIDTYPE_TGID", 1}}, p.Params[0].Enum, "through the typedef")
	assert.Equal(t, "PIDTYPE_TGID", EnumName(p.Params[0].Enum, 0xdead00000001, 4), "compared at the enum's size")
	assert.Equal(t, "", EnumName(p.Params[0].Enum, 5, 4))
	assert.Equal(t, ArgBool, p.Params[1].Kind)

	_, err = ProtoFromBTF(&btf.Func{Name: "g", Type: &btf.Int{Name: "int", Size: 4}})
	assert.ErrorContains(t, err, "not a prototype")
}

// TestProtoErr: functions whose BTF prototype does not describe their
// registers say why, and their arguments decode raw (recorded kernels).
func TestProtoErr(t *testing.T) {
	eachKernel(t, func(t *testing.T, fx fixture) {
		byValue := fx.plain(func(_ string, fp *btf.FuncProto) bool { return rawByValue(fp) })
		require.NotEmpty(t, byValue, "the recorded kernel has struct-by-value functions")
		var copyName string
		for _, sfx := range []string{".isra.", ".constprop.", ".part."} {
			for _, n := range fx.meta.Rules[sfx] {
				for _, s := range fx.k.Syms {
					if BaseName(s.Name) == n && IsSuffixedCopy(s.Name) && s.Module == "" && copyName == "" {
						copyName = s.Name
					}
				}
			}
		}
		require.NotEmpty(t, copyName, "the recorded kernel has a compiler copy")
		fs, err := fx.k.Match([]string{"do_sys_openat2", byValue[0], copyName}, nil)
		require.NoError(t, err)
		got := map[string]string{}
		for _, f := range fs {
			got[f.Name] = f.ProtoErr
		}
		assert.Equal(t, "", got["do_sys_openat2"])
		// A struct of up to 8 bytes fills one argument slot: the later
		// parameters stay at their positions and decode by name; a wider
		// one shifts them, so the arguments show raw.
		if size, _ := rawStructSize(fx.rawProto(byValue[0], "")); size > 8 {
			assert.Contains(t, got[byValue[0]], fmt.Sprintf("struct passed by value (%s, %d bytes) fills two argument registers", fs[1].Proto.StructByValue, size))
		} else {
			assert.Empty(t, got[byValue[0]], "a %d-byte struct fills one slot", size)
		}
		if _, own := fx.k.BTF(copyName, ""); own != nil {
			assert.Contains(t, got[copyName], "compiler copy "+copyName+" has no BTF of its own")
		}
	})
}
