package recorder

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
