package allocator_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

func TestLeaseRequestsValidate(t *testing.T) {
	key := allocator.LeaseKey{DatacenterID: 1, WorkerID: 2}
	claim := allocator.ClaimRequest{DatacenterID: 1, MinWorkerID: 0, MaxWorkerID: 31, Holder: "a", TTL: time.Second, CeilingMS: 5, MaxClockOffset: time.Second}
	hb := allocator.HeartbeatRequest{Key: key, Holder: "a", FencingVersion: 3, TTL: time.Second, CeilingMS: 5, MaxClockOffset: time.Second}
	rel := allocator.ReleaseRequest{Key: key, Holder: "a", FencingVersion: 3, LastTimestampMS: 5, Owner: "orders-api", RequestID: "r1"}
	evict := allocator.EvictRequest{Key: key, FencingVersion: 3, Owner: "ops", RequestID: "r2", Reason: "host retired"}
	long := strings.Repeat("h", allocator.MaxHolderLen+1)
	tests := []struct {
		name string
		err  error
		want string // "" for valid
	}{
		{"claim", claim.Validate(), ""},
		{"claim with offset 0", func() error { r := claim; r.MaxClockOffset = 0; return r.Validate() }(), ""},
		{"claim of the largest pool", func() error { r := claim; r.MaxWorkerID = allocator.MaxPoolSize - 1; return r.Validate() }(), ""},
		{"claim of a larger pool", func() error { r := claim; r.MaxWorkerID = allocator.MaxPoolSize; return r.Validate() }(), "larger than 65536"},
		{"claim with negative offset", func() error { r := claim; r.MaxClockOffset = -1; return r.Validate() }(), "negative clock offset"},
		{"claim with long holder", func() error { r := claim; r.Holder = long; return r.Validate() }(), "holder must have 1 to 255 bytes"},
		{"heartbeat", hb.Validate(), ""},
		{"heartbeat without holder", func() error { r := hb; r.Holder = ""; return r.Validate() }(), "invalid heartbeat: holder"},
		{"heartbeat with ttl 0", func() error { r := hb; r.TTL = 0; return r.Validate() }(), "ttl 0s is below 1ms"},
		{"heartbeat with negative ceiling", func() error { r := hb; r.CeilingMS = -1; return r.Validate() }(), "negative ceiling"},
		{"heartbeat with negative offset", func() error { r := hb; r.MaxClockOffset = -time.Second; return r.Validate() }(), "negative clock offset"},
		{"heartbeat with worker beyond int32", func() error { r := hb; r.Key.WorkerID = 1 << 31; return r.Validate() }(), "out of range"},
		{"heartbeat with negative version", func() error { r := hb; r.FencingVersion = -1; return r.Validate() }(), "negative fencing version"},
		{"release", rel.Validate(), ""},
		{"release with nothing issued", func() error { r := rel; r.LastTimestampMS = 0; return r.Validate() }(), ""},
		{"release with long holder", func() error { r := rel; r.Holder = long; return r.Validate() }(), "invalid release: holder"},
		{"release with negative last timestamp", func() error { r := rel; r.LastTimestampMS = -2; return r.Validate() }(), "negative last timestamp -2"},
		{"release with negative datacenter", func() error { r := rel; r.Key.DatacenterID = -1; return r.Validate() }(), "out of range"},
		{"release with long owner", func() error { r := rel; r.Owner = strings.Repeat("o", 256); return r.Validate() }(), "owner of 256 bytes is longer than 255"},
		{"release with NUL in request ID", func() error { r := rel; r.RequestID = "a\x00b"; return r.Validate() }(), "request ID must be UTF-8 text"},
		{"claim with longest owner", func() error { r := claim; r.Owner = strings.Repeat("o", 255); return r.Validate() }(), ""},
		{"claim with owner not UTF-8", func() error { r := claim; r.Owner = "\xff"; return r.Validate() }(), "invalid claim: owner must be UTF-8"},
		{"claim with long request ID", func() error { r := claim; r.RequestID = strings.Repeat("r", 256); return r.Validate() }(), "request ID of 256 bytes"},
		{"heartbeat with long owner", func() error { r := hb; r.Owner = strings.Repeat("o", 256); return r.Validate() }(), "invalid heartbeat: owner"},
		{"evict", evict.Validate(), ""},
		{"evict at any version", func() error { r := evict; r.FencingVersion = 0; r.Reason = ""; return r.Validate() }(), ""},
		{"evict with negative version", func() error { r := evict; r.FencingVersion = -1; return r.Validate() }(), "invalid eviction: negative fencing version"},
		{"evict with worker beyond int32", func() error { r := evict; r.Key.WorkerID = 1 << 31; return r.Validate() }(), "out of range"},
		{"evict with long reason", func() error { r := evict; r.Reason = strings.Repeat("x", 1025); return r.Validate() }(), "reason of 1025 bytes"},
		{"evict with reason not UTF-8", func() error { r := evict; r.Reason = "\xc3("; return r.Validate() }(), "reason must be UTF-8"},
		{"evict with long owner", func() error { r := evict; r.Owner = strings.Repeat("o", 256); return r.Validate() }(), "owner of 256"},
	}
	for _, tt := range tests {
		switch {
		case tt.want == "" && tt.err != nil:
			t.Errorf("%s: got %v, want valid", tt.name, tt.err)
		case tt.want != "" && (tt.err == nil || !strings.Contains(tt.err.Error(), tt.want)):
			t.Errorf("%s: got %v, want an error saying %q", tt.name, tt.err, tt.want)
		}
	}
}

func TestEventKindValidate(t *testing.T) {
	for _, k := range []allocator.EventKind{allocator.EventAcquire, allocator.EventTakeover, allocator.EventRelease, allocator.EventLost, allocator.EventEvict} {
		if err := k.Validate(); err != nil {
			t.Errorf("%s.Validate() = %v, want nil", k, err)
		}
	}
	for _, k := range []allocator.EventKind{"", "vanished", "Acquire"} {
		if err := k.Validate(); err == nil {
			t.Errorf("EventKind(%q).Validate() = nil, want an error", k)
		}
	}
}

func TestReleaseCeiling(t *testing.T) {
	tests := []struct {
		name                 string
		floor, ceiling, last int64
		want                 int64
		invalid              bool
	}{
		{"last timestamp used", 1001, 5000, 3000, 3000, false},
		{"nothing issued: the previous ceiling", 1001, 5000, 0, 1000, false},
		{"the floor itself", 1001, 5000, 1001, 1001, false},
		{"the ceiling itself", 1001, 5000, 5000, 5000, false},
		{"first holder of a fresh row, nothing issued", 1, 5000, 0, 0, false},
		{"a claim that found its own ceiling", 5001, 5000, 0, 5000, false},
		{"one below the floor", 1001, 5000, 1000, 0, true},
		{"far below the floor", 1001, 5000, 1, 0, true},
		{"one above the ceiling", 1001, 5000, 5001, 0, true},
		{"an hour above the ceiling", 1001, 5000, 5000 + 3600000, 0, true},
		{"unknown floor, nothing issued: kept", 0, 5000, 0, 5000, false},
		{"unknown floor, last timestamp used", 0, 5000, 4000, 4000, false},
		{"unknown floor, above the ceiling", 0, 5000, 5001, 0, true},
	}
	for _, tt := range tests {
		got, err := allocator.ReleaseCeiling(tt.floor, tt.ceiling, tt.last)
		switch {
		case tt.invalid && !errors.Is(err, allocator.ErrInvalidRelease):
			t.Errorf("%s: ReleaseCeiling(%d, %d, %d) = %d, %v; want ErrInvalidRelease", tt.name, tt.floor, tt.ceiling, tt.last, got, err)
		case tt.invalid && errors.Is(err, allocator.ErrLeaseLost):
			t.Errorf("%s: error %v wraps ErrLeaseLost", tt.name, err)
		case !tt.invalid && (err != nil || got != tt.want):
			t.Errorf("%s: ReleaseCeiling(%d, %d, %d) = %d, %v; want %d", tt.name, tt.floor, tt.ceiling, tt.last, got, err, tt.want)
		case !tt.invalid && got > tt.ceiling:
			t.Errorf("%s: ReleaseCeiling raised the ceiling %d to %d", tt.name, tt.ceiling, got)
		}
	}
}

func TestEvictCheckRow(t *testing.T) {
	key := allocator.LeaseKey{DatacenterID: 1, WorkerID: 2}
	held := allocator.Lease{LeaseKey: key, Holder: "a", FencingVersion: 7, CeilingMS: 900}
	free := allocator.Lease{LeaseKey: key, FencingVersion: 7, CeilingMS: 900}
	tests := []struct {
		name  string
		req   allocator.EvictRequest
		row   allocator.Lease
		found bool
		want  error
	}{
		{"held, any version", allocator.EvictRequest{Key: key}, held, true, nil},
		{"held, at its version", allocator.EvictRequest{Key: key, FencingVersion: 7}, held, true, nil},
		{"held, another version", allocator.EvictRequest{Key: key, FencingVersion: 6}, held, true, allocator.ErrLeaseLost},
		{"free", allocator.EvictRequest{Key: key}, free, true, allocator.ErrLeaseNotHeld},
		{"free, at its version", allocator.EvictRequest{Key: key, FencingVersion: 7}, free, true, allocator.ErrLeaseNotHeld},
		{"missing", allocator.EvictRequest{Key: key}, allocator.Lease{}, false, allocator.ErrLeaseNotHeld},
	}
	for _, tt := range tests {
		err := tt.req.CheckRow(tt.row, tt.found)
		if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, err, tt.want)
		}
	}
	d := allocator.EvictDetail(allocator.Lease{Owner: "orders-api", FencingVersion: 7, CeilingMS: 900}, "host retired")
	for _, want := range []string{"version 7 (now 8)", "ceiling 900", "orders-api", "host retired"} {
		if !strings.Contains(d, want) {
			t.Errorf("EvictDetail = %q, want it to mention %q", d, want)
		}
	}
}

func TestLeaseEventFilterValidate(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		f    allocator.LeaseEventFilter
		want string // "" for valid
	}{
		{"zero", allocator.LeaseEventFilter{}, ""},
		{"everything", allocator.LeaseEventFilter{AfterID: 5, Limit: 10, DatacenterID: new(int64(1)), WorkerID: new(int64(31)),
			Holder: "h", Owner: "o", Kind: allocator.EventEvict, Since: now, Until: now.Add(time.Hour)}, ""},
		{"an empty range", allocator.LeaseEventFilter{Since: now, Until: now}, ""},
		{"unknown kind", allocator.LeaseEventFilter{Kind: "heartbeat"}, `unknown lease event kind "heartbeat"`},
		{"negative after", allocator.LeaseEventFilter{AfterID: -1}, "negative event ID"},
		{"negative worker", allocator.LeaseEventFilter{WorkerID: new(int64(-1))}, "worker -1 out of range"},
		{"datacenter beyond int32", allocator.LeaseEventFilter{DatacenterID: new(int64(1 << 32))}, "out of range"},
		{"long holder", allocator.LeaseEventFilter{Holder: strings.Repeat("h", 256)}, "holder must have at most 255 bytes"},
		{"long owner", allocator.LeaseEventFilter{Owner: strings.Repeat("o", 256)}, "owner must have at most 255 bytes"},
		{"until before since", allocator.LeaseEventFilter{Since: now, Until: now.Add(-time.Millisecond)}, "is before since"},
	}
	for _, tt := range tests {
		err := tt.f.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: got %v, want valid", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: got %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
}

func TestLeaseEventValidate(t *testing.T) {
	ok := allocator.LeaseEvent{Holder: "h", Kind: allocator.EventLost, Owner: "o", RequestID: "r"}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid event: %v", err)
	}
	for name, ev := range map[string]allocator.LeaseEvent{
		"unknown kind":      {Holder: "h", Kind: "gone"},
		"long holder":       {Holder: strings.Repeat("h", 256), Kind: allocator.EventLost},
		"negative worker":   {Holder: "h", Kind: allocator.EventLost, LeaseKey: allocator.LeaseKey{WorkerID: -1}},
		"long owner":        {Holder: "h", Kind: allocator.EventLost, Owner: strings.Repeat("o", 256)},
		"request ID binary": {Holder: "h", Kind: allocator.EventLost, RequestID: "\xff\xfe"},
	} {
		if err := ev.Validate(); err == nil {
			t.Errorf("%s: got nil, want an error", name)
		}
	}
}
