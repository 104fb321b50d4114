package symbols

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fakeSources(t *testing.T) kernelSources {
	d := t.TempDir()
	s := kernelSources{
		kallsyms: filepath.Join(d, "kallsyms"),
		filter:   filepath.Join(d, "available_filter_functions"),
		modules:  filepath.Join(d, "modules"),
		bootID:   filepath.Join(d, "boot_id"),
		cacheDir: filepath.Join(d, "cache"),
	}
	write := func(p, b string) { require.NoError(t, os.WriteFile(p, []byte(b), 0o600)) }
	write(s.kallsyms, "ffff000000001000 T vfs_read\n"+
		"ffff000000002000 t do_one.isra.0\n"+
		"ffff000000003000 D some_data\n"+
		"ffff000000004000 t bpf_prog_0123_ftp_fentry\t[bpf]\n"+
		"ffff000000005000 t ftrace_trampoline\t[__builtin__ftrace]\n"+
		"ffff800000010000 t xfs_read\t[xfs]\n")
	write(s.filter, "vfs_read\ndo_one.isra.0\nxfs_read [xfs]\n")
	write(s.filter+"_addrs", "ffff000000001000 vfs_read\n")
	write(s.modules, "xfs 2564096 1 - Live 0xffff800000010000\n")
	write(s.bootID, "0d6e1c3a-5b1f-4d3e-9c55-1c2b3a4d5e6f\n")
	return s
}

// TestSymbolCache: a second load with the same boot and modules reads the
// cache (the kernel's files are not read again: here they changed and the
// old symbols come back), a module loaded or another boot reads the
// kernel again, and BPF program and ftrace trampoline symbols are dropped
// either way.
func TestSymbolCache(t *testing.T) {
	s := fakeSources(t)
	k, err := loadKernel(s, "arm64", nil)
	require.NoError(t, err)
	assert.False(t, k.FromCache)
	names := func(k *Kernel) []string {
		var out []string
		for _, sy := range k.Syms {
			out = append(out, sy.Name+"/"+sy.Module)
		}
		return out
	}
	want := []string{"vfs_read/", "do_one.isra.0/", "xfs_read/xfs"}
	assert.Equal(t, want, names(k))
	assert.Equal(t, map[FilterKey]int{{Name: "vfs_read"}: 1, {Name: "do_one.isra.0"}: 1, {Name: "xfs_read", Module: "xfs"}: 1}, k.Filter)
	fi, err := os.Stat(s.cacheDir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "root-only: the cache holds kernel addresses")

	// The kernel's files change without a module load or reboot (they
	// cannot, for what is cached): the cache answers.
	require.NoError(t, os.WriteFile(s.kallsyms, []byte("ffff000000009000 T other\n"), 0o600))
	require.NoError(t, os.WriteFile(s.filter, []byte("other\n"), 0o600))
	k2, err := loadKernel(s, "arm64", nil)
	require.NoError(t, err)
	assert.True(t, k2.FromCache)
	assert.Equal(t, want, names(k2))
	assert.Equal(t, k.Filter, k2.Filter)
	assert.Equal(t, uint64(0xffff000000001000), k2.Syms[0].Addr)
	assert.Equal(t, []uint64{0xffff000000001000}, k2.loadAddrs(), "addrs read and cached")
	require.NoError(t, os.WriteFile(s.filter+"_addrs", []byte("ffff000000009000 other\n"), 0o600))
	assert.Equal(t, []uint64{0xffff000000001000}, k2.loadAddrs(), "addrs from the cache")

	// A use count changes: same key.
	require.NoError(t, os.WriteFile(s.modules, []byte("xfs 2564096 3 nfsd, Live 0xffff800000010000\n"), 0o600))
	k3, err := loadKernel(s, "arm64", nil)
	require.NoError(t, err)
	assert.True(t, k3.FromCache)

	// A module loaded: read again, old files replaced.
	require.NoError(t, os.WriteFile(s.modules, []byte("xfs 2564096 1 - Live 0xffff800000010000\nnfsd 1000 0 - Live 0xffff800000100000\n"), 0o600))
	k4, err := loadKernel(s, "arm64", nil)
	require.NoError(t, err)
	assert.False(t, k4.FromCache)
	assert.Equal(t, []string{"other/"}, names(k4))
	files, _ := filepath.Glob(filepath.Join(s.cacheDir, "*"))
	assert.Len(t, files, 2, "only the current key's kallsyms and filter files: %v", files)

	// Another boot: read again.
	require.NoError(t, os.WriteFile(s.bootID, []byte("a-new-boot\n"), 0o600))
	require.NoError(t, os.WriteFile(s.kallsyms, []byte("ffff000000007000 T third\n"), 0o600))
	k5, err := loadKernel(s, "arm64", nil)
	require.NoError(t, err)
	assert.False(t, k5.FromCache)
	assert.Equal(t, []string{"third/"}, names(k5))

	// No cache directory possible: read every time, no error.
	s.cacheDir = filepath.Join(s.kallsyms, "not-a-dir")
	k6, err := loadKernel(s, "arm64", nil)
	require.NoError(t, err)
	assert.False(t, k6.FromCache)
	assert.Equal(t, []string{"third/"}, names(k6))
}

// TestSymbolCacheHidden: without privilege kallsyms shows zero addresses;
// that is an error and nothing is cached.
func TestSymbolCacheHidden(t *testing.T) {
	s := fakeSources(t)
	require.NoError(t, os.WriteFile(s.kallsyms, []byte("0000000000000000 T vfs_read\n0000000000000000 T vfs_write\n"), 0o600))
	_, err := loadKernel(s, "arm64", nil)
	require.ErrorIs(t, err, ErrHiddenAddresses)
	_, err = os.Stat(s.cacheDir)
	assert.True(t, os.IsNotExist(err), "nothing cached")
}
