package sequence_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator/sequence"
)

func TestFormatWrite(t *testing.T) {
	at := time.Date(2026, 11, 27, 9, 30, 0, 0, time.UTC)
	tests := []struct {
		format string
		n      int64
		want   string
	}{
		{"INV-{yyyy}-{seq:06}", 123, "INV-2026-000123"},
		{"{yyMMdd}{seq:05}", 45, "26112700045"},
		{"{yyyyMMdd}{seq:06}", 45, "20261127000045"},
		{"{seq}", 7, "7"},
		{"R {seq}/{yy}", 1234567, "R 1234567/26"},
		{"A{seq:01}", 9, "A9"},
		{"{dd}.{MM}.{yyyy}#{seq:03}", 5, "27.11.2026#005"},
	}
	for _, tc := range tests {
		f, err := sequence.ParseFormat(tc.format)
		if err != nil {
			t.Errorf("ParseFormat(%q): %v", tc.format, err)
			continue
		}
		if got := f.Write(at, tc.n); got != tc.want {
			t.Errorf("%q with %d: got %q, want %q", tc.format, tc.n, got, tc.want)
		}
	}
}

func TestFormatInvalid(t *testing.T) {
	tests := []struct {
		format string
		want   string // in the message
	}{
		{"", "empty format"},
		{"INV-{yyyy}", "no counter field"},
		{"INV-2026", "no counter field"},
		{"{seq}{seq}", "2 counter fields"},
		{"{seq:6}", "want {seq} or {seq:0N}"},
		{"{seq:019}", "want {seq} or {seq:0N}"},
		{"{seq:00}", "want {seq} or {seq:0N}"},
		{"{seq:0x}", "want {seq} or {seq:0N}"},
		{"{seq}{yyyy}", "runs into the date field"},
		{"{yyyyQ}{seq}", "unknown field"},
		{"{}{seq}", "empty field"},
		{"INV-{seq", "without its '}'"},
		{"INV}-{seq}", "without its '{'"},
		{"INV\n{seq}", "not allowed"},
		{"INV,{seq}", "not allowed"},
		{strings.Repeat("A", 60) + "{seq}", "at most 64"},
	}
	for _, tc := range tests {
		_, err := sequence.ParseFormat(tc.format)
		if err == nil {
			t.Errorf("ParseFormat(%q): no error, want one with %q", tc.format, tc.want)
			continue
		}
		if !errors.Is(err, sequence.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFormat(%q): got %v, want ErrInvalid with %q", tc.format, err, tc.want)
		}
	}
}

func TestMaxNumber(t *testing.T) {
	tests := []struct {
		format string
		want   int64
	}{
		{"{seq:01}", 9},
		{"{seq:06}", 999999},
		{"{seq:018}", 999999999999999999},
		{"{seq}", 1<<63 - 1},
	}
	for _, tc := range tests {
		f, err := sequence.ParseFormat(tc.format)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.MaxNumber(); got != tc.want {
			t.Errorf("%q: got %d, want %d", tc.format, got, tc.want)
		}
	}
}

func TestCompileInvalid(t *testing.T) {
	good := sequence.Sequence{Name: "inv", Format: "INV-{yyyy}-{seq:06}", Reset: sequence.ResetYearly, Zone: "Europe/Berlin"}
	if _, err := good.Compile(); err != nil {
		t.Fatalf("valid sequence: %v", err)
	}
	tests := []struct {
		name   string
		change func(*sequence.Sequence)
		want   string
	}{
		{"no counter", func(s *sequence.Sequence) { s.Format = "INV-{yyyy}" }, "no counter field"},
		{"unknown zone", func(s *sequence.Sequence) { s.Zone = "Mars/Olympus" }, "unknown time zone"},
		{"local zone", func(s *sequence.Sequence) { s.Zone = "Local" }, "node's own"},
		{"yearly without year", func(s *sequence.Sequence) { s.Format = "INV-{seq:06}" }, "needs the year"},
		{"daily without day", func(s *sequence.Sequence) { s.Reset = sequence.ResetDaily }, "needs the year, month and day"},
		{"monthly without month", func(s *sequence.Sequence) { s.Reset = sequence.ResetMonthly }, "needs the year and month"},
		{"unknown reset", func(s *sequence.Sequence) { s.Reset = "weekly" }, "unknown reset"},
		{"negative start", func(s *sequence.Sequence) { s.Start = -1 }, "negative"},
		{"start too wide", func(s *sequence.Sequence) { s.Start = 1000000 }, "does not fit"},
		{"ttl too short", func(s *sequence.Sequence) { s.TTL = time.Millisecond }, "ttl"},
		{"ttl too long", func(s *sequence.Sequence) { s.TTL = 25 * time.Hour }, "ttl"},
		{"bad name", func(s *sequence.Sequence) { s.Name = "Bad Name" }, "must start with"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.change(&s)
			_, err := s.Compile()
			if err == nil || !errors.Is(err, sequence.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrInvalid with %q", err, tc.want)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	got := sequence.Sequence{Name: "a", Format: "{seq}"}.Normalize()
	if got.Reset != sequence.ResetNone || got.Zone != "UTC" || got.Start != 1 || got.TTL != sequence.DefaultTTL {
		t.Errorf("got %+v, want reset none, zone UTC, start 1, ttl %v", got, sequence.DefaultTTL)
	}
	zero := sequence.Sequence{Name: "a", Format: "{seq}", StartZero: true}.Normalize()
	if zero.Start != 0 || !zero.StartZero {
		t.Errorf("StartZero: got start %d, want 0", zero.Start)
	}
}

// TestPeriodAcrossDST reads periods in Europe/Berlin around the two
// daylight-saving changes of 2026 (29 March, 25 October): the day is the
// zone's, at whatever offset applies that night, not UTC's nor a fixed
// offset's.
func TestPeriodAcrossDST(t *testing.T) {
	c, err := sequence.Sequence{Name: "d", Format: "{yyyyMMdd}{seq:05}", Reset: sequence.ResetDaily, Zone: "Europe/Berlin"}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		utc  string
		want string
	}{
		// Spring: CET (+1) until 01:00 UTC on 29 March, then CEST (+2).
		{"2026-03-28T22:59:59Z", "2026-03-28"}, // 23:59:59 CET
		{"2026-03-28T23:00:00Z", "2026-03-29"}, // 00:00 CET
		{"2026-03-29T21:59:59Z", "2026-03-29"}, // 23:59:59 CEST: the day had 23 hours
		{"2026-03-29T22:00:00Z", "2026-03-30"}, // 00:00 CEST
		// Autumn: CEST (+2) until 01:00 UTC on 25 October, then CET (+1).
		{"2026-10-24T21:59:59Z", "2026-10-24"},
		{"2026-10-24T22:00:00Z", "2026-10-25"}, // 00:00 CEST
		{"2026-10-25T22:59:59Z", "2026-10-25"}, // 23:59:59 CET: the day had 25 hours
		{"2026-10-25T23:00:00Z", "2026-10-26"},
	}
	for _, tc := range tests {
		at, err := time.Parse(time.RFC3339, tc.utc)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.PeriodAt(at); got != tc.want {
			t.Errorf("PeriodAt(%s): got %s, want %s", tc.utc, got, tc.want)
		}
		if got, want := c.Write(at, 1)[:8], strings.ReplaceAll(tc.want, "-", ""); got != want {
			t.Errorf("Write(%s): date %s, want %s", tc.utc, got, want)
		}
	}
}

func TestPeriodKinds(t *testing.T) {
	at := time.Date(2026, 12, 31, 23, 30, 0, 0, time.UTC) // 2027-01-01 08:30 in Tokyo
	tests := []struct {
		reset  sequence.Reset
		format string
		zone   string
		want   string
	}{
		{sequence.ResetNone, "{seq}", "UTC", sequence.NoPeriod},
		{sequence.ResetYearly, "{yyyy}{seq:04}", "UTC", "2026"},
		{sequence.ResetYearly, "{yyyy}{seq:04}", "Asia/Tokyo", "2027"},
		{sequence.ResetMonthly, "{yyyyMM}{seq:04}", "Asia/Tokyo", "2027-01"},
		{sequence.ResetDaily, "{yyMMdd}{seq:04}", "America/New_York", "2026-12-31"},
	}
	for _, tc := range tests {
		c, err := sequence.Sequence{Name: "p", Format: tc.format, Reset: tc.reset, Zone: tc.zone}.Compile()
		if err != nil {
			t.Fatal(err)
		}
		if got := c.PeriodAt(at); got != tc.want {
			t.Errorf("%s in %s: got %s, want %s", tc.reset, tc.zone, got, tc.want)
		}
	}
}

func TestCheckPrune(t *testing.T) {
	compile := func(reset sequence.Reset, format string) *sequence.Compiled {
		c, err := sequence.Sequence{Name: "s", Format: format, Reset: reset}.Compile()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	yearly, monthly := compile(sequence.ResetYearly, "{yyyy}{seq:04}"), compile(sequence.ResetMonthly, "{yyyyMM}{seq:04}")
	daily, flat := compile(sequence.ResetDaily, "{yyyyMMdd}{seq:04}"), compile(sequence.ResetNone, "{seq}")
	tests := []struct {
		c               *sequence.Compiled
		before, current string
		ok              bool
	}{
		{yearly, "2026", "2026", true},
		{yearly, "2025", "2026", true},
		{yearly, "2027", "2026", false},
		{yearly, "2026-01", "2026", false},
		{yearly, "26", "2026", false},
		{monthly, "2026-11", "2026-11", true},
		{monthly, "2026-12", "2026-11", false},
		{monthly, "2026-00", "2026-11", false},
		{monthly, "2026-1", "2026-11", false},
		{daily, "2026-11-27", "2026-11-27", true},
		{daily, "2026-02-29", "2026-11-27", false}, // 2026 is no leap year
		{daily, "2026-11-28", "2026-11-27", false},
		{daily, " 2026-11-01", "2026-11-27", false},
		{flat, sequence.NoPeriod, sequence.NoPeriod, false},
		{flat, "2026", sequence.NoPeriod, false},
	}
	for _, tc := range tests {
		err := tc.c.CheckPrune(tc.before, tc.current)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, sequence.ErrInvalid)) {
			t.Errorf("%s CheckPrune(%q, current %q): got %v, want ok %v (else sequence.ErrInvalid)", tc.c.Reset, tc.before, tc.current, err, tc.ok)
		}
	}
}
