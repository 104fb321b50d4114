package symbols

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseKallsyms(t *testing.T) {
	in := "ffff800080010000 T _text\n" +
		"ffff8000803a1b20 T do_sys_openat2\n" +
		"ffff8000803f0000 D some_data\n" +
		"ffff8000803c0000 t show_stat\n" +
		"ffff800000a10000 t ext4_file_open\t[ext4]\n" +
		"ffff800000a10100 t ext4_file_read_iter\t[ext4]"
	syms, err := ParseKallsyms(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, syms, 5, "text symbols only (the D symbol is dropped)")
	assert.Equal(t, Sym{Name: "do_sys_openat2", Addr: 0xffff8000803a1b20}, syms[1])
	assert.Equal(t, Sym{Name: "ext4_file_open", Addr: 0xffff800000a10000, Module: "ext4"}, syms[3])
	assert.Equal(t, Sym{Name: "ext4_file_read_iter", Addr: 0xffff800000a10100, Module: "ext4"}, syms[4], "last line without newline")
	_, err = ParseKallsyms(strings.NewReader("zz T bad\n"))
	assert.ErrorContains(t, err, "bad address")
	ff, err := ParseFilterFunctions(strings.NewReader("show_stat\nshow_stat\next4_file_open [ext4]\n\n"))
	require.NoError(t, err)
	assert.Equal(t, map[FilterKey]int{{"show_stat", ""}: 2, {"ext4_file_open", "ext4"}: 1}, ff)
}

func TestParsePattern(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Pattern
	}{
		{"vfs_read", Pattern{Raw: "vfs_read", Glob: "vfs_read", Exact: true}},
		{"vfs_*", Pattern{Raw: "vfs_*", Glob: "vfs_*"}},
		{"ext4_file_open [ext4]", Pattern{Raw: "ext4_file_open [ext4]", Glob: "ext4_file_open", Module: "ext4", Exact: true}},
		{"ext4:ext4_file_*", Pattern{Raw: "ext4:ext4_file_*", Glob: "ext4_file_*", Module: "ext4"}},
		{"show_stat@ffff8000803c1000", Pattern{Raw: "show_stat@ffff8000803c1000", Glob: "show_stat", Addr: 0xffff8000803c1000, Exact: true}},
	} {
		got, err := ParsePattern(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
	_, err := ParsePattern("vfs_[")
	assert.Error(t, err)
	_, err = ParsePattern("x@zz")
	assert.ErrorContains(t, err, "bad address")
}

func TestBaseNameDenied(t *testing.T) {
	assert.Equal(t, "foo", BaseName("foo.isra.0"))
	assert.Equal(t, "foo", BaseName("foo.constprop.0.isra.0"))
	assert.Equal(t, "foo", BaseName("foo"))
	assert.Equal(t, "migrate_disable", Denied("migrate_disable"))
	assert.Equal(t, "", Denied("vfs_read"))
}

func TestArchiveRoundTrip(t *testing.T) {
	src := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(src, "btf"), 0o755))
	files := map[string][]byte{"kallsyms": []byte("ffff0000 T vfs_read\n"), "btf/vmlinux": {0x9f, 0xeb, 1, 0, 0xff, 0}}
	big := make([]byte, 1000)
	for i := range big {
		big[i] = byte(i * 7)
	}
	files["btf/dummy"] = big
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(src, name), data, 0o644))
	}
	var b strings.Builder
	b.WriteString("[    1.234] some kernel line\n")
	require.NoError(t, WriteArchive(&b, src))
	// A kernel log line interleaved in the block is ignored.
	lines := strings.Split(b.String(), "\n")
	lines = append(lines[:4], append([]string{"[    2.345] random: crng init done"}, lines[4:]...)...)
	dst := t.TempDir()
	got, err := ExtractArchive(strings.NewReader(strings.Join(lines, "\n")), dst)
	require.NoError(t, err)
	assert.Len(t, got, 3)
	for name, data := range files {
		back, err := os.ReadFile(filepath.Join(dst, name))
		require.NoError(t, err)
		assert.Equal(t, data, back, name)
	}
	// A truncated block (no end marker) or a lost chunk is an error.
	cut := strings.Join(lines[:len(lines)-3], "\n")
	_, err = ExtractArchive(strings.NewReader(cut), t.TempDir())
	assert.ErrorContains(t, err, "no complete")
	var lost []string
	for i, l := range lines {
		if i != 6 {
			lost = append(lost, l)
		}
	}
	_, err = ExtractArchive(strings.NewReader(strings.Join(lost, "\n")), t.TempDir())
	assert.Error(t, err)
}
