package lab

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckAdd: files pass; a directory, a missing file and a relative
// guest path are refused, naming the entry.
func TestCheckAdd(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(f, []byte("x"), 0o644))
	assert.NoError(t, CheckAdd([]string{f + ":/f", f + ":/g/h"}))
	assert.ErrorContains(t, CheckAdd([]string{dir + ":/d"}), "is not a regular file")
	assert.ErrorContains(t, CheckAdd([]string{dir + "/missing:/m"}), "no such file")
	assert.ErrorContains(t, CheckAdd([]string{f + ":rel"}), "absolute guest path")
}
