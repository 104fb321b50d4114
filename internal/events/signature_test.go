package events

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ftprobe/ftprobe/internal/symbols"
)

// TestSignature: function-pointer parameters carry their name inside
// "(*name)", and a function without parameters reads "(void)".
func TestSignature(t *testing.T) {
	f := &symbols.Func{Name: "vfs_mkobj", Proto: &symbols.Proto{Ret: "int", Params: []symbols.Param{
		{Name: "dentry", Type: "struct dentry *"}, {Name: "mode", Type: "umode_t"},
		{Name: "f", Type: "int (*)(struct dentry *, umode_t, void *)"}, {Name: "arg", Type: "void *"}}}}
	assert.Equal(t, "int vfs_mkobj(struct dentry * dentry, umode_t mode, int (*f)(struct dentry *, umode_t, void *), void * arg)", Signature(f))
	assert.Equal(t, "void vfs_caches_init(void)", Signature(&symbols.Func{Name: "vfs_caches_init", Proto: &symbols.Proto{Ret: "void"}}))
	assert.Equal(t, "foo(?)", Signature(&symbols.Func{Name: "foo"}))
}
