package symbols

import (
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/assert"
)

// TestCTypeFuncPointer: a pointer to a function prototype is spelled as C
// spells it, with its parameter types, "void" for none.
func TestCTypeFuncPointer(t *testing.T) {
	i := &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}
	file := &btf.Pointer{Target: &btf.Struct{Name: "file"}}
	fp := &btf.Pointer{Target: &btf.FuncProto{Return: i, Params: []btf.FuncParam{{Name: "f", Type: file}, {Name: "n", Type: i}}}}
	assert.Equal(t, "int (*)(struct file *, int)", cType(fp))
	assert.Equal(t, "void (*)(void)", cType(&btf.Pointer{Target: &btf.FuncProto{Return: &btf.Void{}}}))
	assert.Equal(t, "const char *", cType(&btf.Pointer{Target: &btf.Const{Type: &btf.Int{Name: "char", Size: 1}}}))
}
