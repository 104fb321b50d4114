package symbols

import (
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/assert"
)

// TestCtxReadable: the parameter types a trampoline program may load
// straight from its ctx on every supported kernel (6.12's btf_ctx_access
// as the strictest), and the ones it must fetch through bpf_get_func_arg.
func TestCtxReadable(t *testing.T) {
	i32 := &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}
	char := &btf.Int{Name: "char", Size: 1, Encoding: btf.Signed}
	sk := &btf.Struct{Name: "sock", Size: 8}
	un := &btf.Union{Name: "u", Size: 8}
	en := &btf.Enum{Name: "e", Size: 4}
	proto := &btf.FuncProto{Return: i32}
	for _, c := range []struct {
		name string
		t    btf.Type
		want bool
	}{
		{"int", i32, true},
		{"typedef size_t", &btf.Typedef{Name: "size_t", Type: &btf.Int{Name: "unsigned long", Size: 8}}, true},
		{"enum", en, true},
		{"struct sock *", &btf.Pointer{Target: sk}, true},
		{"const struct sock *", &btf.Pointer{Target: &btf.Const{Type: sk}}, true},
		{"union u *", &btf.Pointer{Target: un}, true},
		{"const char *", &btf.Pointer{Target: &btf.Const{Type: char}}, true},
		{"typedef'd int *", &btf.Pointer{Target: &btf.Typedef{Name: "u32", Type: i32}}, true},
		{"void *", &btf.Pointer{Target: &btf.Void{}}, true},
		{"const void *: 6.12 refuses", &btf.Pointer{Target: &btf.Const{Type: &btf.Void{}}}, false},
		{"struct sock **: 6.12 refuses", &btf.Pointer{Target: &btf.Pointer{Target: sk}}, false},
		{"function pointer: 6.12 refuses", &btf.Pointer{Target: proto}, false},
		{"enum e *: 6.12 refuses", &btf.Pointer{Target: en}, false},
		{"struct by value", sk, false},
	} {
		assert.Equal(t, c.want, ctxReadable(c.t), c.name)
	}
}
