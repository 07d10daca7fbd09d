package snowflake

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLayoutValidate(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		l        Layout
		wantErr  string // substring; "" for valid
		wantWarn bool
	}{
		{"zero is default", Layout{}, "", false},
		{"default", DefaultLayout(), "", false},
		{"sum 62", Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 11, Epoch: DefaultEpoch}, "", false},
		{"sum 53", Layout{TimeBits: 41, DatacenterBits: 0, WorkerBits: 5, SequenceBits: 7, Epoch: DefaultEpoch}, "", false},
		{"sum 39, time only", Layout{TimeBits: 39, Epoch: DefaultEpoch}, "", true},
		{"sum 64", Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 13, Epoch: DefaultEpoch}, "sum to 64", false},
		{"sum 53, lifetime under 10 years", Layout{TimeBits: 38, DatacenterBits: 0, WorkerBits: 5, SequenceBits: 10, Epoch: DefaultEpoch}, "less than 10 years", false},
		{"negative width", Layout{TimeBits: 41, DatacenterBits: -1, WorkerBits: 11, SequenceBits: 12, Epoch: DefaultEpoch}, "datacenter bits -1", false},
		{"no time bits", Layout{TimeBits: 0, DatacenterBits: 20, WorkerBits: 20, SequenceBits: 23, Epoch: DefaultEpoch}, "time bits must be at least 1", false},
		{"no epoch", Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 12}, "epoch is not set", false},
		{"future epoch", Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 12, Epoch: now.Add(time.Hour)}, "future", false},
		// 38 bits of milliseconds last about 8.7 years.
		{"runs out within 10 years", Layout{TimeBits: 38, DatacenterBits: 5, WorkerBits: 8, SequenceBits: 12, Epoch: DefaultEpoch}, "less than 10 years", false},
		// 39 bits last about 17 years: valid, with a warning.
		{"runs out within 30 years", Layout{TimeBits: 39, DatacenterBits: 5, WorkerBits: 7, SequenceBits: 12, Epoch: DefaultEpoch}, "", true},
		// uid-generator's default: 28 bits of seconds from 2016; as milliseconds far too short.
		{"old epoch used up", Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 12, Epoch: time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)}, "less than 10 years", false},
		{"no worker bits", Layout{TimeBits: 43, DatacenterBits: 0, WorkerBits: 0, SequenceBits: 20, Epoch: DefaultEpoch}, "", false},
		{"time only from 1970", Layout{TimeBits: 63, Epoch: time.Unix(0, 0)}, "", false},
		{"no node bits from 1970", Layout{TimeBits: 41, SequenceBits: 22, Epoch: time.Unix(0, 0)}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.l.validate(now)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got %v, want valid", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			case tt.wantErr != "" && !errors.Is(err, ErrInvalidLayout):
				t.Fatalf("got %v, want it to wrap ErrInvalidLayout", err)
			}
			if got := tt.l.warning(now) != ""; got != tt.wantWarn {
				t.Errorf("warning: got %q, want one: %v", tt.l.warning(now), tt.wantWarn)
			}
		})
	}
}

func TestLayoutEnd(t *testing.T) {
	tests := []struct {
		l    Layout
		want time.Time
	}{
		{DefaultLayout(), time.UnixMilli(DefaultEpoch.UnixMilli() + 1<<41)},
		{Layout{TimeBits: 1, SequenceBits: 62, Epoch: time.Unix(0, 0)}, time.UnixMilli(2)},
		{Layout{TimeBits: 62, SequenceBits: 1, Epoch: time.Unix(0, 0)}, time.UnixMilli(1 << 62)},
		// 2^63 ms = 9,223,372,036,854,775 s + 808 ms: beyond int64 milliseconds.
		{Layout{TimeBits: 63, Epoch: time.Unix(0, 0)}, time.Unix(9223372036854775, 808e6)},
		{Layout{TimeBits: 63, Epoch: time.UnixMilli(-1500)}, time.Unix(9223372036854774, 308e6)},
	}
	for _, tt := range tests {
		if got := tt.l.End(); !got.Equal(tt.want) {
			t.Errorf("%v: End got %v, want %v", tt.l, got, tt.want)
		}
	}
}

func TestLayoutDiff(t *testing.T) {
	a := DefaultLayout()
	if d := a.Diff(Layout{}); d != "" {
		t.Errorf("default vs zero: got %q, want no difference", d)
	}
	b := a
	b.WorkerBits, b.SequenceBits = 6, 11
	b.Epoch = b.Epoch.Add(time.Hour)
	want := "worker bits 5 != 6, sequence bits 12 != 11, epoch 2026-01-01T00:00:00Z != 2026-01-01T01:00:00Z"
	if got := a.Diff(b); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestComposeDecompose(t *testing.T) {
	l := DefaultLayout()
	p := Parts{Timestamp: 123456789, Datacenter: 31, Worker: 7, Sequence: 4095}
	id, err := l.Compose(p)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := int64(id), int64(123456789)<<22|31<<17|7<<12|4095; got != want {
		t.Fatalf("Compose: got %d, want %d", got, want)
	}
	got := l.Decompose(id)
	p.Time = time.UnixMilli(DefaultEpoch.UnixMilli() + p.Timestamp).UTC()
	if got != p {
		t.Errorf("Decompose: got %+v, want %+v", got, p)
	}
	for _, bad := range []Parts{{Timestamp: -1}, {Timestamp: 1 << 41}, {Datacenter: 32}, {Worker: 32}, {Sequence: 4096}} {
		if _, err := l.Compose(bad); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Compose(%+v): got %v, want ErrOutOfRange", bad, err)
		}
	}
}

func TestSmallestID(t *testing.T) {
	l := DefaultLayout()
	at := DefaultEpoch.Add(1500 * time.Millisecond)
	if got, want := l.SmallestID(at), ID(1500<<22); got != want {
		t.Errorf("got %d, want %d", got, want)
	}
	if got := l.SmallestID(DefaultEpoch.Add(-time.Hour)); got != 0 {
		t.Errorf("before the epoch: got %d, want 0", got)
	}
}

func TestParseID(t *testing.T) {
	tests := []struct {
		in   string
		want ID
		ok   bool
	}{
		{"0", 0, true},
		{"9223372036854775807", 9223372036854775807, true},
		{"123", 123, true},
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1e3", 0, false},
		{"abc", 0, false},
		{"9223372036854775808", 0, false},
		{" 1", 0, false},
		{"12345678901234567890123", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseID(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseID(%q): got %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidID) {
			t.Errorf("ParseID(%q): got %v, want ErrInvalidID", tt.in, err)
		}
	}
}

func TestIDJSON(t *testing.T) {
	b, err := json.Marshal(struct{ ID ID }{ID: 1 << 60})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"ID":"1152921504606846976"}`; got != want {
		t.Errorf("Marshal: got %s, want %s", got, want)
	}
	for _, in := range []string{`"1152921504606846976"`, `1152921504606846976`} {
		var id ID
		if err := json.Unmarshal([]byte(in), &id); err != nil || id != 1<<60 {
			t.Errorf("Unmarshal(%s): got %d, %v; want %d", in, id, err, ID(1<<60))
		}
	}
	for _, in := range []string{`"x"`, `-5`, `1.5`, `"1e3"`, `true`} {
		var id ID
		if err := json.Unmarshal([]byte(in), &id); err == nil {
			t.Errorf("Unmarshal(%s): got %d, want an error", in, id)
		}
	}
}

// FuzzComposeDecompose checks that Decompose inverts Compose for arbitrary
// valid layouts and parts, and that IDs order by timestamp first.
func FuzzComposeDecompose(f *testing.F) {
	f.Add(uint8(41), uint8(5), uint8(5), int64(1<<40), int64(3), int64(9), int64(100))
	f.Add(uint8(50), uint8(0), uint8(1), int64(0), int64(0), int64(1), int64(0))
	f.Add(uint8(43), uint8(10), uint8(10), int64(12345), int64(1023), int64(0), int64(1))
	f.Fuzz(func(t *testing.T, tb, db, wb uint8, ts, dc, w, seq int64) {
		l := Layout{TimeBits: int(tb % 64), DatacenterBits: int(db % 64), WorkerBits: int(wb % 64), Epoch: DefaultEpoch}
		l.SequenceBits = 63 - l.TimeBits - l.DatacenterBits - l.WorkerBits
		if l.validate(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)) != nil {
			return
		}
		abs := func(v int64) int64 {
			if v < 0 {
				return -(v + 1)
			}
			return v
		}
		p := Parts{
			Timestamp:  abs(ts) % (l.MaxTimestamp() + 1),
			Datacenter: abs(dc) % (l.MaxDatacenter() + 1),
			Worker:     abs(w) % (l.MaxWorker() + 1),
			Sequence:   abs(seq) % (l.MaxSequence() + 1),
		}
		id, err := l.Compose(p)
		if err != nil {
			t.Fatalf("Compose(%+v) under %s: %v", p, l, err)
		}
		if id < 0 {
			t.Fatalf("Compose(%+v) under %s: negative ID %d", p, l, id)
		}
		got := l.Decompose(id)
		p.Time = time.UnixMilli(l.EpochMillis() + p.Timestamp).UTC()
		if got != p {
			t.Fatalf("under %s: Decompose(Compose(%+v)) = %+v", l, p, got)
		}
		back, err := ParseID(id.String())
		if err != nil || back != id {
			t.Fatalf("ParseID(%q): got %d, %v", id.String(), back, err)
		}
		if p.Timestamp < l.MaxTimestamp() {
			next, _ := l.Compose(Parts{Timestamp: p.Timestamp + 1})
			if next <= id {
				t.Fatalf("under %s: the next millisecond's smallest ID %d is not above %d", l, next, id)
			}
		}
	})
}
