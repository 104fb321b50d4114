//go:build tools

package ftprobe

// Keeps bpf2go (used by gen.go) and its dependencies in go.mod/go.sum, so
// `make generate` works on a fresh clone.
import _ "github.com/cilium/ebpf/cmd/bpf2go"
