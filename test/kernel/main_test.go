package kernel

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the kernel tests inside the lab VM only (inLab). On any
// other machine it says so in one line and exits 0 without running them:
// `make test-unit` runs `go test` on this package on the host, where a
// report of skipped tests would read as tests that passed.
func TestMain(m *testing.M) {
	if !inLab() {
		fmt.Fprintln(os.Stderr, "test/kernel: kernel tests run inside the lab VM (make lab-test); none ran on this host")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
