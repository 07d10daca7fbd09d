package statuspage

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

func TestCompressRanges(t *testing.T) {
	seq := func(lo, hi int64) []int64 {
		var out []int64
		for i := lo; i <= hi; i++ {
			out = append(out, i)
		}
		return out
	}
	tests := []struct {
		ids  []int64
		want string
	}{
		{nil, ""},
		{[]int64{5}, "5"},
		{[]int64{1, 3}, "1, 3"},
		{[]int64{4, 5}, "4–5"},
		{seq(5, 31), "5–31"},
		{append(append(seq(0, 3), 5), seq(7, 31)...), "0–3, 5, 7–31"},
		{[]int64{9, 3, 1, 2, 2, 8}, "1–3, 8–9"}, // unordered, repeated
		{[]int64{0, 1023}, "0, 1023"},
	}
	for _, tt := range tests {
		if got := compressRanges(tt.ids); got != tt.want {
			t.Errorf("compressRanges(%v): got %q, want %q", tt.ids, got, tt.want)
		}
	}
}

func TestWorkerPools(t *testing.T) {
	dbNow := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	live, expired := dbNow.Add(20*time.Second), dbNow.Add(-time.Second)
	var leases []allocator.Lease
	for w := int64(0); w < 32; w++ {
		l := allocator.Lease{LeaseKey: allocator.LeaseKey{DatacenterID: 0, WorkerID: w}}
		switch w {
		case 0, 1, 2, 4:
			l.Holder, l.ExpiresAt = "node", live
		case 3:
			l.Holder, l.ExpiresAt = "gone", expired // claimable again
		case 6:
			l.Holder, l.ExpiresAt = "node", live
		case 5:
			l.ExpiresAt = live // released early: no holder
		}
		leases = append(leases, l)
	}
	leases = append(leases,
		allocator.Lease{LeaseKey: allocator.LeaseKey{DatacenterID: 1, WorkerID: 0}, Holder: "x", ExpiresAt: live},
		allocator.Lease{LeaseKey: allocator.LeaseKey{DatacenterID: 1, WorkerID: 1}, Holder: "y", ExpiresAt: dbNow}, // expires now: free
	)
	pools := workerPools(leases, dbNow)
	if len(pools) != 2 {
		t.Fatalf("got %d pools, want 2 (one per datacenter)", len(pools))
	}
	if got, want := pools[0].FreeText(), "27 of 32 free: 3, 5, 7–31"; got != want {
		t.Errorf("datacenter 0: got %q, want %q", got, want)
	}
	if got, want := pools[0].ExpiredText(), "3"; got != want || pools[0].Held != 5 {
		t.Errorf("datacenter 0: got expired %q, %d held; want %q, 5", got, pools[0].Held, want)
	}
	if got, want := pools[1].FreeText(), "1 of 2 free: 1"; got != want {
		t.Errorf("datacenter 1: got %q, want %q", got, want)
	}
}

// TestAttentionOrder puts every problem there is at once and checks the
// order: critical ones first, causes before effects.
func TestAttentionOrder(t *testing.T) {
	full := workerPool{Datacenter: 0, Total: 4}
	low := workerPool{Datacenter: 1, Total: 32, Free: []int64{30, 31, 9}}
	in := attentionInput{
		Status:     allocator.KeeperStatus{Held: true, ValidFor: 2 * time.Second, ClockOffset: -6 * time.Second},
		ReadyErr:   errors.New("clock offset from database time too large"),
		DatabaseOK: false, Database: "dial tcp: connection refused",
		Durability: "unsafe: synchronous_commit=off (overridden)",
		LeaseTTL:   30 * time.Second, MaxClockOffset: 5 * time.Second,
		LeasesError: "timeout", NamespacesError: "",
		Pools: []workerPool{full, low},
		Namespaces: []namespaceRow{
			{Name: "orders", Used: true, Failing: true, Runway: 0, MaxID: 10, MaxStep: 100, Remaining: math.MaxInt64 - 10},
			{Name: "invoices", Used: true, Failing: true, Runway: 500, MaxID: 10, MaxStep: 100, Remaining: math.MaxInt64 - 10},
			{Name: "full", MaxID: 99, MaxIDLimit: 99, Limit: 99, Remaining: 0, MaxStep: 10},
			{Name: "near", MaxID: 50, MaxIDLimit: 99, Limit: 99, Remaining: 49, MaxStep: 10},
			{Name: "fine", MaxID: 50, MaxIDLimit: 1000, Limit: 1000, Remaining: 950, MaxStep: 10},
		},
		HeartbeatFails: 3, Lost: 1, Window: 15 * time.Minute,
	}
	want := []string{
		"critical: Not ready: Snowflake IDs are refused (503)",
		"critical: Database unreachable",
		"critical: Durability check overridden",
		"critical: Clock offset beyond the limit",
		"critical: Namespace orders: fetches failing, buffer empty",
		"critical: Namespace full: exhausted",
		"warning: Namespace invoices: fetches failing",
		"warning: Namespace near: close to its limit",
		"warning: Datacenter 0: no worker ID free",
		"warning: Datacenter 1: worker pool almost full",
		"warning: Lease lost",
		"warning: Heartbeats failing",
		"warning: Cannot read the lease table",
	}
	var got []string
	for _, n := range attention(in) {
		got = append(got, n.Class()+": "+n.Title)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("notices:\ngot\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}

	// A node in good order: nothing.
	ok := attentionInput{
		Status:     allocator.KeeperStatus{Held: true, Ready: true, ValidFor: 25 * time.Second, ClockOffset: time.Millisecond},
		DatabaseOK: true, Durability: "ok", LeaseTTL: 30 * time.Second, MaxClockOffset: 5 * time.Second,
		Pools:      []workerPool{{Total: 32, Free: make([]int64, 4)}}, // 4 of 32 free: above a tenth
		Namespaces: []namespaceRow{{Name: "fine", Used: true, Runway: 10, MaxStep: 10, Remaining: 100}},
		Window:     15 * time.Minute,
	}
	if n := attention(ok); len(n) != 0 {
		t.Errorf("a node in order: got notices %+v, want none", n)
	}
}

// TestAttentionThresholds checks each threshold on both sides.
func TestAttentionThresholds(t *testing.T) {
	base := func() attentionInput {
		return attentionInput{
			Status:     allocator.KeeperStatus{Held: true, Ready: true, ValidFor: 25 * time.Second},
			DatabaseOK: true, LeaseTTL: 30 * time.Second, MaxClockOffset: 5 * time.Second, Window: time.Minute,
		}
	}
	tests := []struct {
		name   string
		change func(*attentionInput)
		want   string // the one notice, "" for none
	}{
		{"offset at half the limit", func(in *attentionInput) { in.Status.ClockOffset = 2500 * time.Millisecond }, ""},
		{"offset past half the limit", func(in *attentionInput) { in.Status.ClockOffset = -2501 * time.Millisecond }, "warning: Clock offset large"},
		{"offset past the limit", func(in *attentionInput) { in.Status.ClockOffset = 5001 * time.Millisecond }, "critical: Clock offset beyond the limit"},
		{"lease at half its TTL", func(in *attentionInput) { in.Status.ValidFor = 15 * time.Second }, ""},
		{"lease below half its TTL", func(in *attentionInput) { in.Status.ValidFor = 14 * time.Second }, "warning: Lease expiring"},
		{"pool with a tenth free", func(in *attentionInput) { in.Pools = []workerPool{{Total: 30, Free: []int64{1, 2, 3}}} }, "warning: Datacenter 0: worker pool almost full"},
		{"pool with more than a tenth free", func(in *attentionInput) { in.Pools = []workerPool{{Total: 30, Free: []int64{1, 2, 3, 4}}} }, ""},
		{"ten ranges left", func(in *attentionInput) {
			in.Namespaces = []namespaceRow{{Name: "n", MaxStep: 10, Remaining: 100}}
		}, ""},
		{"fewer than ten ranges left", func(in *attentionInput) {
			in.Namespaces = []namespaceRow{{Name: "n", MaxStep: 10, Remaining: 99}}
		}, "warning: Namespace n: close to its limit"},
		{"durability warning", func(in *attentionInput) { in.Durability = "ok (warning: synchronous_standby_names='')" }, "warning: Durability not fully checked"},
		{"durability unchecked", func(in *attentionInput) { in.Durability = "unchecked" }, "warning: Durability not fully checked"},
		{"durability check failed, overridden", func(in *attentionInput) { in.Durability = "unchecked (overridden)" }, "critical: Durability check overridden"},
		{"durability fine", func(in *attentionInput) { in.Durability = "ok" }, ""},
	}
	for _, tt := range tests {
		in := base()
		tt.change(&in)
		var got []string
		for _, n := range attention(in) {
			got = append(got, n.Class()+": "+n.Title)
		}
		if strings.Join(got, "; ") != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestAttentionHideNames: a page without details counts the namespaces of
// each notice, at the place their notices would be, and names none.
func TestAttentionHideNames(t *testing.T) {
	in := attentionInput{
		Status:     allocator.KeeperStatus{Held: true, Ready: true, ValidFor: 25 * time.Second},
		DatabaseOK: true, Durability: "ok", LeaseTTL: 30 * time.Second, MaxClockOffset: 5 * time.Second,
		Pools: []workerPool{{Datacenter: 0, Total: 4}},
		Namespaces: []namespaceRow{
			{Name: "orders", Used: true, Failing: true, Runway: 0, MaxID: 10, MaxStep: 100, Remaining: math.MaxInt64 - 10},
			{Name: "full", MaxID: 99, MaxIDLimit: 99, Limit: 99, Remaining: 0, MaxStep: 10},
			{Name: "also-full", MaxID: 77, MaxIDLimit: 77, Limit: 77, Remaining: 0, MaxStep: 10},
			{Name: "near", MaxID: 50, MaxIDLimit: 99, Limit: 99, Remaining: 49, MaxStep: 10},
		},
		HideNames: true,
	}
	want := []string{
		"critical: 1 namespace: fetches failing, buffer empty",
		"critical: 2 namespaces: exhausted",
		"warning: 1 namespace: close to its limit",
		"warning: Datacenter 0: no worker ID free",
	}
	var got []string
	for _, n := range attention(in) {
		got = append(got, n.Class()+": "+n.Title)
		for _, name := range []string{"orders", "full", "near", "99", "77"} {
			if strings.Contains(n.Title+n.Detail, name) {
				t.Errorf("notice %q — %q names %q", n.Title, n.Detail, name)
			}
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("notices:\ngot\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}
