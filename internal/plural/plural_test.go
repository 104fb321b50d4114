package plural

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCount(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Count(0, "function"), "0 functions"},
		{Count(1, "function"), "1 function"},
		{Count(2, "function"), "2 functions"},
		{Count(uint64(1), "entry"), "1 entry"},
		{Count(uint64(7), "entry"), "7 entries"},
		{Count(int64(-1), "call"), "-1 calls"},
		{Count(uint32(3), "forked process"), "3 forked processes"},
		{Count(2, "recursion miss"), "2 recursion misses"},
		{Count(2, "stack"), "2 stacks"},
		{Count(2, "day"), "2 days"},
		{Count(4, "CPU"), "4 CPUs"},
		{Count(uint64(math.MaxUint64), "event"), "18446744073709551615 events"},
	} {
		assert.Equal(t, c.want, c.got)
	}
}
