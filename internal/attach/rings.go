package attach

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/ftprobe/ftprobe/internal/rings"
)

// sizeRings sizes the rings map of spec (bpf/trace.bpf.c): one slot per
// possible CPU, each ringbuf of size bytes.
func sizeRings(spec *ebpf.CollectionSpec, size uint32) error {
	rs := spec.Maps["rings"]
	if rs == nil || rs.InnerMap == nil {
		return fmt.Errorf("BPF object lacks the rings map")
	}
	n, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("possible CPUs: %w", err)
	}
	rs.MaxEntries = uint32(n)
	rs.InnerMap = rs.InnerMap.Copy()
	rs.InnerMap.MaxEntries = size
	return nil
}

// createRings creates the ringbuf of every online CPU from spec and puts
// it in the rings map at the CPU's index. A CPU brought online later has
// none: its records are counted as ringbuf drops.
func (t *Tracer) createRings(spec *ebpf.MapSpec, opts Options) error {
	cpus, err := rings.OnlineCPUs()
	if err != nil {
		return err
	}
	for _, cpu := range cpus {
		m, err := ebpf.NewMap(spec)
		if err != nil {
			return opts.Kernel.Explain(opts.Mode, "", fmt.Errorf("create the ringbuf of CPU %d (%d bytes): %w", cpu, spec.MaxEntries, err))
		}
		t.rings = append(t.rings, rings.Ring{CPU: cpu, Map: m})
		if err := t.maps.Rings.Put(uint32(cpu), m); err != nil {
			return fmt.Errorf("put the ringbuf of CPU %d in the rings map: %w", cpu, err)
		}
	}
	return nil
}

// Rings returns the ringbuf of each online CPU (none with NoEvents or
// DryRun); they close with the Tracer.
func (t *Tracer) Rings() []rings.Ring { return t.rings }
