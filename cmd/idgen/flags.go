package main

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/snowflake"
)

// layoutFlag is --layout: time/datacenter/worker/sequence bits, e.g.
// 41/5/5/12, or a preset name (snowflake.Presets).
type layoutFlag struct{ time, datacenter, worker, sequence int }

func defaultLayoutFlag() layoutFlag {
	return layoutFlag{snowflake.DefaultTimeBits, snowflake.DefaultDatacenterBits,
		snowflake.DefaultWorkerBits, snowflake.DefaultSequenceBits}
}

func (l *layoutFlag) String() string {
	return fmt.Sprintf("%d/%d/%d/%d", l.time, l.datacenter, l.worker, l.sequence)
}

func (l *layoutFlag) Set(s string) error {
	if p, ok := snowflake.PresetLayout(s); ok {
		*l = layoutFlag{p.TimeBits, p.DatacenterBits, p.WorkerBits, p.SequenceBits}
		return nil
	}
	parts := strings.Split(s, "/")
	if len(parts) != 4 {
		return fmt.Errorf("want four bit widths time/datacenter/worker/sequence, e.g. 41/5/5/12, or a preset: %s", snowflake.PresetNames())
	}
	var v [4]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 63 {
			return fmt.Errorf("bit width %q is not a number from 0 to 63", p)
		}
		v[i] = n
	}
	if sum := v[0] + v[1] + v[2] + v[3]; sum > 63 {
		return fmt.Errorf("bit widths sum to %d, want at most 63", sum)
	}
	*l = layoutFlag{v[0], v[1], v[2], v[3]}
	return nil
}

// presetHelp lists the layout presets with what each allows.
func presetHelp() string {
	var b strings.Builder
	b.WriteString("Presets: ")
	for i, p := range snowflake.Presets() {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "`%s` = %s", p.Name, p.Layout.Describe())
	}
	return b.String()
}

// formatsFlag is --id-format: "FORMAT" for Snowflake IDs, "NS=FORMAT" per
// namespace, comma-separated.
type formatsFlag struct{ m map[string]snowflake.Format }

func (f *formatsFlag) String() string {
	var parts []string
	for _, ns := range slices.Sorted(maps.Keys(f.m)) {
		if ns == "" {
			parts = append(parts, f.m[ns].String())
		} else {
			parts = append(parts, ns+"="+f.m[ns].String())
		}
	}
	return strings.Join(parts, ",")
}

func (f *formatsFlag) Set(s string) error {
	m := map[string]snowflake.Format{}
	if s == "" { // none: every ID in decimal (what --print-config writes for the default)
		f.m = nil
		return nil
	}
	for _, item := range strings.Split(s, ",") {
		ns, name, found := strings.Cut(item, "=")
		if !found {
			ns, name = "", item
		} else if err := allocator.ValidNamespace(ns); err != nil {
			return fmt.Errorf("namespace %q: %w", ns, err)
		}
		format, err := snowflake.ParseFormat(name)
		if err != nil || format == snowflake.FormatAny {
			return fmt.Errorf("format %q is none of %s", name, snowflake.FormatNames)
		}
		if _, dup := m[ns]; dup {
			return fmt.Errorf("%q given twice", cmp.Or(ns, "the Snowflake format"))
		}
		m[ns] = format
	}
	f.m = m
	return nil
}

// formatFlag holds one format (--format); unset, snowflake.FormatAny.
type formatFlag struct{ f snowflake.Format }

func (f *formatFlag) String() string { return f.f.String() }

func (f *formatFlag) Set(s string) error {
	v, err := snowflake.ParseFormat(s)
	if err != nil || v == snowflake.FormatAny {
		return fmt.Errorf("want one of %s", snowflake.FormatNames)
	}
	f.f = v
	return nil
}

// timeFlag is a flag holding an RFC 3339 instant (--epoch).
type timeFlag struct{ t time.Time }

func (f *timeFlag) String() string { return f.t.UTC().Format(time.RFC3339Nano) }

func (f *timeFlag) Set(s string) error {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("want an RFC 3339 time such as 2026-01-01T00:00:00Z")
	}
	f.t = t.UTC()
	return nil
}

// layout returns the validated layout of the --layout and --epoch flags.
func layoutOf(bits layoutFlag, epoch timeFlag) (snowflake.Layout, error) {
	l := snowflake.Layout{
		TimeBits:       bits.time,
		DatacenterBits: bits.datacenter,
		WorkerBits:     bits.worker,
		SequenceBits:   bits.sequence,
		Epoch:          epoch.t,
	}
	if err := l.Validate(); err != nil {
		return snowflake.Layout{}, err
	}
	return l, nil
}

// workerRangeFlag is --worker-ids: "A-B" or "N"; unset, every worker ID.
type workerRangeFlag struct {
	r   allocator.WorkerRange
	set bool
}

func (f *workerRangeFlag) String() string {
	if !f.set {
		return ""
	}
	return fmt.Sprintf("%d-%d", f.r.Min, f.r.Max)
}

func (f *workerRangeFlag) Set(s string) error {
	lo, hi, found := strings.Cut(s, "-")
	if !found {
		hi = lo
	}
	a, errA := strconv.ParseInt(lo, 10, 64)
	b, errB := strconv.ParseInt(hi, 10, 64)
	if errA != nil || errB != nil || a < 0 || b < 0 {
		return errors.New("want a range of worker IDs such as 0-31, or one worker ID")
	}
	if a > b {
		return fmt.Errorf("range %d-%d is empty (start above end)", a, b)
	}
	f.r, f.set = allocator.WorkerRange{Min: a, Max: b}, true
	return nil
}

// choiceFlag is a string flag restricted to a few values.
type choiceFlag struct {
	v       string
	choices []string
}

func (f *choiceFlag) String() string { return f.v }

func (f *choiceFlag) Set(s string) error {
	for _, c := range f.choices {
		if s == c {
			f.v = s
			return nil
		}
	}
	return fmt.Errorf("want %s", strings.Join(f.choices, " or "))
}

// retentionFlag is --etcd-compact-retention: `auto` (0), `off`/`0`
// (negative), or a duration of at least app.MinEtcdCompactRetention.
type retentionFlag struct{ d time.Duration }

func (f *retentionFlag) String() string {
	switch {
	case f.d == 0:
		return "auto"
	case f.d < 0:
		return "off"
	}
	return f.d.String()
}

func (f *retentionFlag) Set(s string) error {
	switch s {
	case "auto":
		f.d = 0
		return nil
	case "off", "0":
		f.d = app.NoEtcdCompaction
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < app.MinEtcdCompactRetention {
		return fmt.Errorf("want auto, off or a duration of at least %s such as 5m", app.MinEtcdCompactRetention)
	}
	f.d = d
	return nil
}
