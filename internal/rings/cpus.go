package rings

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// OnlineCPUs returns the ids of the online CPUs, in increasing order, from
// /sys/devices/system/cpu/online (Documentation/ABI/testing/sysfs-devices-system-cpu).
// It returns an error when the file cannot be read or parsed.
func OnlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("online CPUs: %w", err)
	}
	cpus, err := ParseCPUList(string(b))
	if err != nil {
		return nil, fmt.Errorf("online CPUs: %w", err)
	}
	return cpus, nil
}

// ParseCPUList parses a kernel CPU list such as "0-3,6" (cpulist_parse
// format, without strides) into its ids, in the order given.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("empty CPU list")
	}
	var out []int
	for _, r := range strings.Split(s, ",") {
		lo, hi, found := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("CPU list %q: bad range %q", s, r)
		}
		z := a
		if found {
			if z, err = strconv.Atoi(hi); err != nil || z < a {
				return nil, fmt.Errorf("CPU list %q: bad range %q", s, r)
			}
		}
		for c := a; c <= z; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// OnlineSlots is the largest online CPU id + 1 (1 when it cannot be
// read): the CPU ids the records' memory covers.
func OnlineSlots() int {
	cpus, err := OnlineCPUs()
	if err != nil || len(cpus) == 0 {
		return 1
	}
	return slices.Max(cpus) + 1
}
