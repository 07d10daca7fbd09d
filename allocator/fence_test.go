package allocator_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

func TestFenceCounter(t *testing.T) {
	const maxInt = math.MaxInt64
	tests := []struct {
		name                       string
		maxID, limit, version, gap int64
		wantMaxID, wantVersion     int64
	}{
		{"no limit", 100, 0, 7, 1000, 1100, 1007},
		{"below the limit", 100, 5000, 7, 1000, 1100, 1007},
		{"up to the limit exactly", 4000, 5000, 7, 1000, 5000, 1007},
		{"past the limit stops at it", 4500, 5000, 7, 1000, 5000, 1007},
		{"at the limit already", 5000, 5000, 7, 1000, 5000, 1007},
		{"near the largest int64", maxInt - 10, 0, 0, 1000, maxInt, 1000},
		{"version near the largest int64", 1, 0, maxInt - 1, 1000, 1001, maxInt},
		{"largest gap", 5, 0, 5, maxInt, maxInt, maxInt},
	}
	for _, tc := range tests {
		gotMax, gotVersion := allocator.FenceCounter(tc.maxID, tc.limit, tc.version, tc.gap)
		if gotMax != tc.wantMaxID || gotVersion != tc.wantVersion {
			t.Errorf("%s: FenceCounter(%d, %d, %d, %d): got %d, %d; want %d, %d", tc.name, tc.maxID, tc.limit, tc.version, tc.gap,
				gotMax, gotVersion, tc.wantMaxID, tc.wantVersion)
		}
	}
}

func TestFenceRequest(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ok := allocator.FenceRequest{Gap: 10, MaxTTL: 30 * time.Second, MaxClockOffset: 5 * time.Second, Owner: "cli:ops", Reason: "restore"}
	if got, want := ok.Ceiling(now), now.Add(35*time.Second).UnixMilli(); got != want {
		t.Errorf("Ceiling without up-to: got %d, want now + ttl + offset = %d", got, want)
	}
	upTo := ok
	upTo.UpTo = now.Add(-time.Hour)
	if got, want := upTo.Ceiling(now), now.Add(-time.Hour).UnixMilli(); got != want {
		t.Errorf("Ceiling with up-to: got %d, want the up-to time %d", got, want)
	}
	tests := []struct {
		name string
		req  allocator.FenceRequest
		want string // "" for valid
	}{
		{"valid", ok, ""},
		{"gap 0", func() allocator.FenceRequest { r := ok; r.Gap = 0; return r }(), "gap 0 is below 1"},
		{"negative ttl", func() allocator.FenceRequest { r := ok; r.MaxTTL = -1; return r }(), "negative ttl"},
		{"negative offset", func() allocator.FenceRequest { r := ok; r.MaxClockOffset = -1; return r }(), "negative ttl"},
		{"up-to before 1970", func() allocator.FenceRequest { r := ok; r.UpTo = time.Unix(-10, 0); return r }(), "before 1970"},
		{"long reason", func() allocator.FenceRequest { r := ok; r.Reason = strings.Repeat("r", 1025); return r }(), "reason of 1025 bytes"},
		{"owner not UTF-8", func() allocator.FenceRequest { r := ok; r.Owner = "\xff"; return r }(), "owner must be UTF-8"},
	}
	for _, tc := range tests {
		err := tc.req.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: got %v, want valid", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestNodeMarkCheck(t *testing.T) {
	w0, w1 := allocator.LeaseKey{WorkerID: 0}, allocator.LeaseKey{DatacenterID: 1, WorkerID: 1}
	store := allocator.StoreMark{StoreID: "s1", Generation: 2, CeilingMS: 500,
		Ceilings: map[allocator.LeaseKey]int64{w0: 1000}, Counters: map[string]int64{"orders": 100, "old": 50}}
	mark := func(gen int64, ceilings map[allocator.LeaseKey]int64, counters map[string]int64) allocator.NodeMark {
		return allocator.NodeMark{StoreID: "s1", Generation: gen, Ceilings: ceilings, Counters: counters}
	}
	tests := []struct {
		name string
		mark allocator.NodeMark
		want string // "" when the store passes
	}{
		{"empty mark", allocator.NodeMark{}, ""},
		{"another store", allocator.NodeMark{StoreID: "s0", Generation: 9, Ceilings: map[allocator.LeaseKey]int64{w0: 5000}}, ""},
		{"at the store", mark(2, map[allocator.LeaseKey]int64{w0: 1000}, map[string]int64{"orders": 100, "old": 50}), ""},
		{"behind the store", mark(1, map[allocator.LeaseKey]int64{w0: 900}, map[string]int64{"orders": 10}), ""},
		{"generation ahead", mark(3, nil, nil), "generation 2, this node saw 3"},
		{"ceiling ahead", mark(2, map[allocator.LeaseKey]int64{w0: 1001}, nil), "worker 0/0 ceiling 1000, this node saw 1001"},
		{"row missing, at the fence's ceiling", mark(2, map[allocator.LeaseKey]int64{w1: 500}, nil), ""},
		{"row missing, above the fence's ceiling", mark(2, map[allocator.LeaseKey]int64{w1: 501}, nil), "worker 1/1 ceiling 500, this node saw 501"},
		{"counter ahead", mark(2, nil, map[string]int64{"orders": 101}), "namespace orders max_id 100, this node saw 101"},
		{"namespace missing", mark(2, nil, map[string]int64{"invoices": 1}), "namespace invoices missing"},
	}
	for _, tc := range tests {
		err := tc.mark.Check(store)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: got %v, want the store to pass", tc.name, err)
		case tc.want != "" && (!errors.Is(err, allocator.ErrStoreBehind) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want ErrStoreBehind naming %q", tc.name, err, tc.want)
		}
	}

	many := mark(2, nil, map[string]int64{})
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		many.Counters[n] = 1
	}
	err := many.Check(store)
	if err == nil || !strings.Contains(err.Error(), "namespace a missing") || !strings.Contains(err.Error(), "and 2 more") ||
		strings.Contains(err.Error(), "namespace f missing") {
		t.Errorf("seven namespaces missing: got %v, want the first five named and 2 more counted", err)
	}
}
