package bench

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/symbols"
)

// TestValidateTarget checks compare --target against a kernel recorded in
// the lab (arm64 7.3): a traceable function passes; an unknown one, a
// deny-listed one and a name with several copies are bad input, named.
func TestValidateTarget(t *testing.T) {
	k, meta, err := symbols.LoadRecorded("../symbols/testdata/arm64-7.3")
	require.NoError(t, err)
	assert.NoError(t, ValidateTarget(k, ""))
	assert.NoError(t, ValidateTarget(k, "vfs_read"))

	err = ValidateTarget(k, "vfs_raed")
	require.True(t, errors.Is(err, ErrBadInput), "%v", err)
	assert.ErrorContains(t, err, "vfs_raed")
	assert.ErrorContains(t, err, "vfs_read", "the closest name is suggested")

	require.NotEmpty(t, meta.Rules["deny"])
	deny := meta.Rules["deny"][0]
	err = ValidateTarget(k, deny)
	require.True(t, errors.Is(err, ErrBadInput), "%v", err)
	assert.ErrorContains(t, err, deny)

	require.NotEmpty(t, meta.Rules["duplicate"])
	dup := meta.Rules["duplicate"][0]
	err = ValidateTarget(k, dup)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrBadInput), "%v", err)
	assert.ErrorContains(t, err, dup)

	assert.ErrorIs(t, ValidateTarget(nil, "vfs_read"), ErrBadInput)
}
