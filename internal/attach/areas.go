package attach

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/ftprobe/ftprobe/internal/rings"
)

// areaChunk is the bytes of records per element of the areas map
// (FTP_AREA_CHUNK in bpf/trace.bpf.c); each element has slack past it for
// the record that starts last.
const areaChunk = 1 << 16

// layoutAreas lays out the areas map of spec (bpf/trace.bpf.c) for
// opts.RingbufSize bytes of records per online CPU: the CPUs' ids below
// area_cpus, area_stride elements each (a control element and the record
// elements). Without records, or in a dry run, the map gets one element:
// the programs are the same, nothing is allocated. It returns the layout
// and its settings.
func layoutAreas(spec *ebpf.CollectionSpec, opts Options) (rings.Geometry, []setting, error) {
	g := rings.Geometry{Chunk: areaChunk, Chunks: max(int(opts.RingbufSize)/areaChunk, 1)}
	m := spec.Maps["areas"]
	if m == nil {
		return g, nil, fmt.Errorf("BPF object lacks the areas map")
	}
	g.ElemSize = int(m.ValueSize+7) &^ 7
	cpus, err := rings.OnlineCPUs()
	if err != nil {
		return g, nil, err
	}
	g.CPUs = cpus
	settings := []setting{{"area_cpus", uint32(g.Slots())}, {"area_stride", uint32(g.Stride())}, {"area_mask", uint32(g.Chunks - 1)}}
	n := g.Slots() * g.Stride()
	if !areasFit(uint64(g.Chunks*g.Chunk), g.Slots()) {
		return g, nil, fmt.Errorf("records of %d bytes per CPU for %d CPUs: %w", g.Chunks*g.Chunk, g.Slots(), ErrAreasTooLarge)
	}
	m.MaxEntries = uint32(n)
	if opts.NoEvents || opts.DryRun {
		m.MaxEntries, g.CPUs = 1, nil
	}
	return g, settings, nil
}

// ErrAreasTooLarge: the records of every CPU together exceed what one BPF
// array holds (kernel/bpf/arraymap.c array_map_alloc: under 4 GiB).
var ErrAreasTooLarge = errors.New("more than the 4 GiB one BPF array holds: a smaller --buffer-size fits")

// Areas returns the records' memory of every CPU: the areas map and its
// layout (no CPU with NoEvents or DryRun); the map closes with the Tracer.
func (t *Tracer) Areas() (*ebpf.Map, rings.Geometry) { return t.maps.Areas, t.geo }
