package attach

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/expr"
)

// TestVariantSelection: the lean object serves exactly the plain trace
// (pid, tid, tree and comm filters allowed), the filter object records
// with --filter, --min-duration, --errors or --live-entries, the stat
// object tables without records (with any filter, --filter or --entry);
// every other combination takes the general object, as do frames in a
// hash for records.
func TestVariantSelection(t *testing.T) {
	plain := Options{RingbufSize: 1 << 20, Filters: Filters{TID: 7, TGID: 5, Comm: "cat", Tree: true}}
	stat := func(o *Options) { o.NoEvents, o.Aggregate = true, true }
	pred := map[uint32]*expr.Plan{0: {EntryOps: []byte{expr.BoolPush}}}
	cases := map[string]struct {
		change func(o *Options)
		want   string
	}{
		"plain trace":             {func(o *Options) {}, "lean"},
		"--strings":               {func(o *Options) { o.Strings = true }, "general"},
		"--stack":                 {func(o *Options) { o.Stack = true }, "general"},
		"--summary":               {func(o *Options) { o.Aggregate = true }, "general"},
		"--min-duration":          {func(o *Options) { o.Filters.MinDuration = time.Microsecond }, "filter"},
		"--errors":                {func(o *Options) { o.Filters.ErrorsOnly = true }, "filter"},
		"--entry":                 {func(o *Options) { o.Entries = map[uint32]bool{1: true} }, "general"},
		"--live-entries":          {func(o *Options) { o.LiveEntries = true }, "filter"},
		"--filter":                {func(o *Options) { o.Exprs = pred }, "filter"},
		"--filter --live-entries": {func(o *Options) { o.Exprs = pred; o.LiveEntries = true }, "filter"},
		"--filter --strings":      {func(o *Options) { o.Exprs = pred; o.Strings = true }, "general"},
		"--filter --entry":        {func(o *Options) { o.Exprs = pred; o.Entries = map[uint32]bool{1: true} }, "general"},
		"--filter --summary":      {func(o *Options) { o.Exprs = pred; o.Aggregate = true }, "general"},
		"stat":                    {stat, "stat"},
		"stat --filter":           {func(o *Options) { stat(o); o.Exprs = pred }, "stat"},
		"stat --entry":            {func(o *Options) { stat(o); o.Entries = map[uint32]bool{1: true} }, "stat"},
		"stat --errors":           {func(o *Options) { stat(o); o.Filters.ErrorsOnly = true }, "stat"},
		"stat --min-dur":          {func(o *Options) { stat(o); o.Filters.MinDuration = time.Millisecond }, "stat"},
		"stat, live flag":         {func(o *Options) { stat(o); o.LiveEntries = true }, "stat"},
		"no events, no agg":       {func(o *Options) { o.NoEvents = true }, "general"},
	}
	for name, c := range cases {
		o := plain
		c.change(&o)
		for _, hash := range []bool{false, true} {
			st, err := settingsOf(o, hash)
			require.NoError(t, err)
			want := c.want
			if hash && (want == "lean" || want == "filter") {
				want = "general"
			}
			assert.Equal(t, want, variantOf(st).name, "%s, frames in hash %v", name, hash)
		}
	}
}

// TestVariantSettings: each variant's object lacks exactly the settings
// it fixes; setSettings writes the others, and a fixed one asked with
// another value is an error, never silently dropped.
func TestVariantSettings(t *testing.T) {
	general, err := bpfobj.LoadTrace()
	require.NoError(t, err)
	all, err := settingsOf(Options{RingbufSize: 1 << 20}, false)
	require.NoError(t, err)
	for _, s := range all {
		assert.Contains(t, general.Variables, s.name)
	}
	for _, v := range variants[:len(variants)-1] {
		spec, err := v.load()
		require.NoError(t, err)
		for _, s := range all {
			_, fixed := v.fixed[s.name]
			_, has := spec.Variables[s.name]
			assert.Equal(t, !fixed, has, "%s object has %s iff it is not fixed", v.name, s.name)
		}
		for n, want := range v.fixed {
			assert.Contains(t, general.Variables, n, "%s fixes a setting the general object has", v.name)
			// A key settingsOf does not give, or gives in another
			// type, would never match: matches would ignore it.
			found := false
			for _, s := range all {
				if s.name == n {
					found = true
					assert.IsType(t, s.value, want, "%s fixes %s in settingsOf's type", v.name, n)
				}
			}
			assert.True(t, found, "%s fixes %s, a setting settingsOf gives", v.name, n)
			// The C's value (FTP_SETTING_0 keeps it as ftp_fixed_NAME),
			// read in the setting's type: the table mirrors it.
			vs := spec.Variables["ftp_fixed_"+n]
			if !assert.NotNil(t, vs, "%s object keeps ftp_fixed_%s", v.name, n) {
				continue
			}
			got := reflect.New(reflect.TypeOf(want))
			require.NoError(t, vs.Get(got.Interface()), "%s: ftp_fixed_%s", v.name, n)
			assert.Equal(t, want, got.Elem().Interface(), "%s fixes %s", v.name, n)
		}
		for name := range spec.Variables {
			if n, ok := strings.CutPrefix(name, "ftp_fixed_"); ok {
				assert.Contains(t, v.fixed, n, "%s object fixes %s: the variants table must say so", v.name, n)
			}
		}
	}

	lean, err := bpfobj.LoadTraceLean()
	require.NoError(t, err)
	st, err := settingsOf(Options{RingbufSize: 1 << 20, Filters: Filters{TID: 42}}, false)
	require.NoError(t, err)
	require.NoError(t, setSettings(lean, st, variants[0].fixed))
	var tid uint32
	require.NoError(t, lean.Variables["filter_tid"].Get(&tid))
	assert.Equal(t, uint32(42), tid)

	st, err = settingsOf(Options{RingbufSize: 1 << 20, Strings: true}, false)
	require.NoError(t, err)
	assert.EqualError(t, setSettings(lean, st, variants[0].fixed), "BPF object lacks variable want_strings")
}
