package chaos

import (
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// at returns the instant ms milliseconds into every synthetic history,
// which starts 10 s after the default epoch.
func at(ms int64) time.Time {
	return snowflake.DefaultEpoch.Add(10*time.Second + time.Duration(ms)*time.Millisecond)
}

// sfID composes a Snowflake ID of the default layout made at t0+ms.
func sfID(t *testing.T, worker, ms, seq int64) int64 {
	t.Helper()
	id, err := snowflake.DefaultLayout().Compose(snowflake.Parts{
		Timestamp: at(ms).UnixMilli() - snowflake.DefaultEpoch.UnixMilli(), Worker: worker, Sequence: seq,
	})
	if err != nil {
		t.Fatalf("compose: %v", err)
	}
	return int64(id)
}

func ev(worker int64, holder string, version int64, kind allocator.EventKind, ms int64) allocator.LeaseEvent {
	return allocator.LeaseEvent{LeaseKey: allocator.LeaseKey{WorkerID: worker}, Holder: holder,
		FencingVersion: version, Kind: kind, At: at(ms)}
}

func draw(holder string, sendMS, recvMS int64, ids ...int64) Draw {
	return Draw{Holder: holder, Count: len(ids), Send: at(sendMS), Recv: at(recvMS), Status: 200,
		Source: "snowflake", IDs: ids}
}

func TestBuildTenures(t *testing.T) {
	events := []allocator.LeaseEvent{
		ev(1, "a", 1, allocator.EventAcquire, 0),
		ev(2, "b", 1, allocator.EventAcquire, 5),
		ev(1, "c", 2, allocator.EventTakeover, 4000),
		ev(1, "a", 1, allocator.EventLost, 4500), // after the takeover: the takeover ends it
		ev(2, "b", 1, allocator.EventRelease, 3000),
		ev(1, "c", 2, allocator.EventLost, 9000),
		ev(1, "c", 3, allocator.EventAcquire, 9100),
		// d's claim began (PostgreSQL's now()) before b's release committed.
		ev(2, "d", 2, allocator.EventAcquire, 2990),
	}
	got := BuildTenures(events)
	want := []Tenure{
		{Key: allocator.LeaseKey{WorkerID: 1}, Holder: "a", Version: 1, Start: at(0), End: at(4000), EndKind: allocator.EventTakeover},
		{Key: allocator.LeaseKey{WorkerID: 1}, Holder: "c", Version: 2, Start: at(4000), End: at(9000), EndKind: allocator.EventLost},
		{Key: allocator.LeaseKey{WorkerID: 1}, Holder: "c", Version: 3, Start: at(9100)},
		{Key: allocator.LeaseKey{WorkerID: 2}, Holder: "b", Version: 1, Start: at(5), End: at(3000), EndKind: allocator.EventRelease},
		{Key: allocator.LeaseKey{WorkerID: 2}, Holder: "d", Version: 2, Start: at(2990)},
	}
	if len(got) != len(want) {
		t.Fatalf("BuildTenures: got %d tenures %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Key != w.Key || g.Holder != w.Holder || g.Version != w.Version || !g.Start.Equal(w.Start) ||
			!g.End.Equal(w.End) || g.EndKind != w.EndKind {
			t.Errorf("tenure %d: got %+v, want %+v", i, g, w)
		}
	}
}

func TestCheck(t *testing.T) {
	// Worker 1: a holds it from 0 to 4000 ms, then c takes it over.
	// Worker 2: b holds it from 0 on.
	events := []allocator.LeaseEvent{
		ev(1, "a", 1, allocator.EventAcquire, 0),
		ev(2, "b", 1, allocator.EventAcquire, 0),
		ev(1, "c", 2, allocator.EventTakeover, 4000),
	}
	clean := []Draw{
		draw("a", 100, 110, sfID(t, 1, 105, 0), sfID(t, 1, 105, 1)),
		draw("b", 100, 110, sfID(t, 2, 105, 0)),
		draw("c", 4100, 4110, sfID(t, 1, 4105, 0)),
		{Holder: "a", Count: 1000, Send: at(200), Recv: at(201), Status: 503},
		{Holder: "a", Count: 1000, Send: at(200), Recv: at(201)},
		{Holder: "b", Count: 1000, Send: at(200), Recv: at(201), Status: 500},
	}
	tests := []struct {
		name  string
		draws []Draw
		in    func(*Input)
		want  Report // only the counters compared below
	}{
		{name: "clean", draws: clean, want: Report{}},
		{
			name:  "duplicate across nodes",
			draws: append(clean[:3:3], draw("c", 4200, 4210, sfID(t, 1, 4105, 0))),
			want:  Report{Duplicates: 1},
		},
		{
			name:  "worker the node never held",
			draws: []Draw{draw("b", 100, 110, sfID(t, 1, 105, 7))},
			want:  Report{Foreign: 1, NoTenure: 1},
		},
		{
			name:  "old holder serving after the takeover",
			draws: []Draw{draw("a", 4100, 4110, sfID(t, 1, 4105, 7))},
			want:  Report{Foreign: 1, NoTenure: 1},
		},
		{
			// A request that spans a pause overlaps a's tenure, but a
			// timestamp after the takeover could not have been under a's
			// ceiling.
			name:  "paused holder's stale timestamp",
			draws: []Draw{draw("a", 3000, 9000, sfID(t, 1, 8000, 7))},
			want:  Report{Foreign: 1, OutsideTenure: 1},
		},
		{
			name:  "new holder below the old holder's timestamps",
			draws: []Draw{draw("a", 3000, 3010, sfID(t, 1, 3005, 0)), draw("c", 4100, 4110, sfID(t, 1, 3004, 9))},
			// c's timestamp 3004 is also below its tenure's start: outside.
			want: Report{Foreign: 1, OutsideTenure: 1},
		},
		{
			name:  "fence overlap with the clock set back",
			draws: []Draw{draw("a", 3000, 3010, sfID(t, 1, 3005, 0)), draw("c", 4100, 4110, sfID(t, 1, 3004, 9))},
			in:    func(in *Input) { in.ClockOffsetMin = map[string]time.Duration{"c": -2 * time.Second} },
			want:  Report{Foreign: 1, FenceOverlap: 1},
		},
		{
			name:  "clock set back, fenced",
			draws: []Draw{draw("a", 3000, 3010, sfID(t, 1, 3005, 0)), draw("c", 4100, 4110, sfID(t, 1, 3006, 0))},
			in:    func(in *Input) { in.ClockOffsetMin = map[string]time.Duration{"c": -2 * time.Second} },
			want:  Report{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Draws: tt.draws, Events: events}
			if tt.in != nil {
				tt.in(&in)
			}
			got := Check(in)
			if got.Duplicates != tt.want.Duplicates || got.Foreign != tt.want.Foreign ||
				got.NoTenure != tt.want.NoTenure || got.OutsideTenure != tt.want.OutsideTenure ||
				got.FenceOverlap != tt.want.FenceOverlap {
				t.Errorf("got duplicates=%d foreign=%d (no_tenure=%d outside=%d fence=%d), want %d %d (%d %d %d); examples %q",
					got.Duplicates, got.Foreign, got.NoTenure, got.OutsideTenure, got.FenceOverlap,
					tt.want.Duplicates, tt.want.Foreign, tt.want.NoTenure, tt.want.OutsideTenure, tt.want.FenceOverlap,
					got.Examples)
			}
			if got.Failed() != (tt.want.Duplicates+tt.want.Foreign > 0) {
				t.Errorf("Failed() = %v, want %v", got.Failed(), tt.want.Duplicates+tt.want.Foreign > 0)
			}
		})
	}

	t.Run("counts", func(t *testing.T) {
		got := Check(Input{Draws: clean, Events: events})
		if got.Requests != 6 || got.Attempted != 3004 || got.Acknowledged != 4 || got.OKRequests != 3 ||
			got.Unavailable503 != 1 || got.TransportErrors != 1 || got.OtherStatus[500] != 1 {
			t.Errorf("got %+v, want requests 6, attempted 3004, acknowledged 4, ok 3, 503 1, transport 1, 500 1", got)
		}
	})
}

func TestCheckSegments(t *testing.T) {
	seg := func(ns string, sendMS, recvMS int64, ids ...int64) Draw {
		return Draw{Namespace: ns, Holder: "a", Count: len(ids), Send: at(sendMS), Recv: at(recvMS), Status: 200,
			Source: "segment", IDs: ids}
	}
	failed := func(ns string, count, status int) Draw {
		return Draw{Namespace: ns, Holder: "a", Count: count, Send: at(11), Recv: at(12), Status: status}
	}
	tests := []struct {
		name                                       string
		draws                                      []Draw
		maxID                                      int64
		strict                                     bool
		dups, uncommitted, strictGaps, strictOrder int64
	}{
		{name: "buffered clean", draws: []Draw{seg("n", 0, 1, 1, 2), seg("n", 0, 1, 101, 102)}, maxID: 200},
		{name: "buffered duplicate", draws: []Draw{seg("n", 0, 1, 1, 2), seg("n", 0, 1, 2, 3)}, maxID: 200, dups: 1},
		{name: "uncommitted range", draws: []Draw{seg("n", 0, 1, 199, 200, 201)}, maxID: 200, uncommitted: 1},
		{name: "strict clean", draws: []Draw{seg("s", 0, 10, 1, 2), seg("s", 5, 15, 3), seg("s", 20, 21, 4)}, maxID: 4, strict: true},
		{name: "strict gap", draws: []Draw{seg("s", 0, 10, 1, 2), seg("s", 20, 21, 5)}, maxID: 5, strict: true, strictGaps: 2},
		{name: "strict unserved tail", draws: []Draw{seg("s", 0, 10, 1, 2)}, maxID: 3, strict: true, strictGaps: 1},
		{name: "strict gap of requests without an answer", draws: []Draw{seg("s", 0, 10, 1, 2), failed("s", 2, 503), seg("s", 20, 21, 5)}, maxID: 5, strict: true},
		{name: "strict gap beyond requests without an answer", draws: []Draw{seg("s", 0, 10, 1, 2), failed("s", 1, 0), seg("s", 20, 21, 6)}, maxID: 6, strict: true, strictGaps: 2},
		{name: "strict gap, a refused request", draws: []Draw{seg("s", 0, 10, 1, 2), failed("s", 2, 429), seg("s", 20, 21, 5)}, maxID: 5, strict: true, strictGaps: 2},
		{
			name:  "strict out of real-time order",
			draws: []Draw{seg("s", 0, 10, 3, 4), seg("s", 20, 21, 1, 2)}, maxID: 4, strict: true, strictOrder: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := tt.draws[0].Namespace
			got := Check(Input{Draws: tt.draws, MaxID: map[string]int64{ns: tt.maxID}, Strict: map[string]bool{ns: tt.strict}})
			if got.Duplicates != tt.dups || got.Uncommitted != tt.uncommitted || got.Foreign != tt.uncommitted ||
				got.StrictGaps != tt.strictGaps || got.StrictOrder != tt.strictOrder {
				t.Errorf("got dups=%d uncommitted=%d foreign=%d gaps=%d order=%d, want %d %d %d %d %d; examples %q",
					got.Duplicates, got.Uncommitted, got.Foreign, got.StrictGaps, got.StrictOrder,
					tt.dups, tt.uncommitted, tt.uncommitted, tt.strictGaps, tt.strictOrder, got.Examples)
			}
		})
	}
}

func TestFirstOK(t *testing.T) {
	draws := []Draw{
		{Node: 0, Send: at(0), Recv: at(5), Status: 200},
		{Node: 1, Send: at(10), Recv: at(30), Status: 200},
		{Node: 1, Send: at(12), Recv: at(20), Status: 200},
		{Node: 1, Send: at(11), Recv: at(15), Status: 503},
		{Node: 1, Send: at(11), Recv: at(14), Status: 200, Namespace: "n"},
	}
	tests := []struct {
		node   int
		ns     string
		from   int64
		want   int64
		wantOK bool
	}{
		{node: 1, ns: "", from: 0, want: 20, wantOK: true},
		{node: 1, ns: "*", from: 0, want: 14, wantOK: true},
		{node: -1, ns: "", from: 0, want: 5, wantOK: true},
		{node: 1, ns: "", from: 13, wantOK: false},
	}
	for _, tt := range tests {
		got, ok := FirstOK(draws, tt.node, tt.ns, at(tt.from))
		if ok != tt.wantOK || (ok && !got.Equal(at(tt.want))) {
			t.Errorf("FirstOK(node %d, %q, from %d): got %v %v, want %v %v", tt.node, tt.ns, tt.from, got, ok, at(tt.want), tt.wantOK)
		}
	}
}

// TestAttributor: the tenure that issued each ID, by Check's rule: a's
// before the takeover, c's after it, none for an ID of the wrong holder
// and none past a's end.
func TestAttributor(t *testing.T) {
	events := []allocator.LeaseEvent{
		ev(1, "a", 1, allocator.EventAcquire, 0),
		ev(1, "c", 2, allocator.EventTakeover, 4000),
	}
	owner := Attributor(Input{Events: events})
	for _, tc := range []struct {
		name    string
		d       Draw
		holder  string
		version int64
	}{
		{"a before the takeover", draw("a", 100, 110, sfID(t, 1, 105, 0)), "a", 1},
		{"c after the takeover", draw("c", 4100, 4110, sfID(t, 1, 4105, 0)), "c", 2},
		{"a's ID past its end", draw("a", 3990, 4200, sfID(t, 1, 4100, 0)), "", 0},
		{"an ID of a worker b never held", draw("b", 100, 110, sfID(t, 1, 105, 0)), "", 0},
	} {
		got, ok := owner(&tc.d, tc.d.IDs[0])
		if ok != (tc.holder != "") || got.Holder != tc.holder || got.Version != tc.version {
			t.Errorf("%s: got %s v%d (ok %v), want %q v%d", tc.name, got.Holder, got.Version, ok, tc.holder, tc.version)
		}
	}
}
