package audit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
)

// TestClickHouseEndToEnd: three node keepers and two lease-API holders
// (their calls as the broker makes them) run on one store wrapped by the
// audit; ClickHouse is unreachable for a spell in the middle (a proxy
// answering 503). Afterwards every event recorded is in ClickHouse exactly
// once after deduplication, none was dropped, and the block records add
// up, per holder, to the IDs each holder issued.
func TestClickHouseEndToEnd(t *testing.T) {
	server := testkit.ClickHouse(t)
	var down atomic.Bool
	proxy := httputil.NewSingleHostReverseProxy(server)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down for the test", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	db := fmt.Sprintf("idgen_test_%d", time.Now().UnixNano())
	dsn := "clickhouse://" + strings.TrimPrefix(front.URL, "http://") + "/" + db
	ch, err := audit.NewClickHouse(dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() { _, _ = ch.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db, nil) })

	rec, err := audit.New(ch, audit.RecorderSettings{Node: "test", BatchSize: 50, FlushInterval: 20 * time.Millisecond,
		BlockInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rec.Start()
	store := audit.WrapStore(testserver.OpenStore(t, "sqlite"), rec)

	issued := map[string]int64{}
	var keepers []*allocator.Keeper
	for i := range 3 {
		k, err := allocator.NewKeeper(store, allocator.KeeperSettings{Holder: fmt.Sprintf("node-%d", i), DatacenterID: 2,
			WorkerIDs: &allocator.WorkerRange{Min: 0, Max: 9}, TTL: time.Second, Heartbeat: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Start(ctx); err != nil {
			t.Fatal(err)
		}
		keepers = append(keepers, k)
	}
	// Two lease-API holders: claim, heartbeat with blocks, release.
	type apiHolder struct {
		name string
		res  allocator.ClaimResult
	}
	var api []*apiHolder
	for i := range 2 {
		h := &apiHolder{name: fmt.Sprintf("%sclient/%d", allocator.RemoteHolderPrefix, i)}
		h.res, err = store.Claim(ctx, allocator.ClaimRequest{DatacenterID: 2, MinWorkerID: 20, MaxWorkerID: 29, Holder: h.name,
			Owner: "client", TTL: 5 * time.Second, CeilingMS: time.Now().UnixMilli() + 5000, MaxClockOffset: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		api = append(api, h)
	}
	var dst []int64
	for round := range 40 {
		down.Store(round >= 10 && round < 25) // the sink is away for a spell
		for _, k := range keepers {
			ids, _, err := k.NextSnowflakesFenced(dst[:0], 100)
			if err == nil {
				issued[k.Holder()] += int64(len(ids))
			}
		}
		for _, h := range api {
			const n = 30 // the holder's generator issued 30 IDs since its last heartbeat
			now := time.Now().UnixMilli()
			_, _, err := store.Heartbeat(ctx, allocator.HeartbeatRequest{Key: h.res.Lease.LeaseKey, Holder: h.name,
				FencingVersion: h.res.Lease.FencingVersion, Owner: "client", TTL: 5 * time.Second, CeilingMS: now + 5000,
				MaxClockOffset: time.Second, Block: allocator.Block{Count: n, FromMS: now - 1, ToMS: now}})
			if err != nil {
				t.Fatal(err)
			}
			issued[h.name] += n
		}
		time.Sleep(25 * time.Millisecond)
	}
	down.Store(false)
	for _, h := range api {
		if _, err := store.Release(ctx, allocator.ReleaseRequest{Key: h.res.Lease.LeaseKey, Holder: h.name, Owner: "client",
			FencingVersion: h.res.Lease.FencingVersion, LastTimestampMS: time.Now().UnixMilli()}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keepers {
		if err := k.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := rec.Close(cctx); err != nil {
		t.Fatal(err)
	}
	st := rec.Stats()
	if st.Dropped != 0 || st.Failures == 0 || st.Sent != st.Recorded {
		t.Fatalf("got %+v; want failures during the outage, nothing dropped, everything sent", st)
	}

	type kindRow struct {
		Kind     string `json:"kind"`
		N        int64  `json:"n,string"`
		Distinct int64  `json:"d,string"`
	}
	rows, err := audit.Query[kindRow](ctx, ch, "SELECT kind, count() AS n, uniqExact(event_id) AS d FROM "+ch.Table()+" FINAL GROUP BY kind")
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]int64{}
	var total int64
	for _, r := range rows {
		if r.N != r.Distinct {
			t.Errorf("%s: got %d rows for %d event IDs after FINAL, want each once", r.Kind, r.N, r.Distinct)
		}
		byKind[r.Kind] = r.N
		total += r.N
	}
	if total != st.Recorded {
		t.Errorf("got %d events in ClickHouse (%v), want the %d recorded", total, byKind, st.Recorded)
	}
	// The store's lease_events are the record of claims, releases and
	// losses: ClickHouse has each of them once.
	events, err := store.ListLeaseEvents(ctx, allocator.LeaseEventFilter{Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for _, ev := range events {
		want[string(ev.Kind)]++
	}
	for _, kind := range []string{"acquire", "takeover", "release", "lost", "evict"} {
		if byKind[kind] != want[kind] {
			t.Errorf("%s: got %d in ClickHouse, want the store's %d (ClickHouse %v, store %v)", kind, byKind[kind], want[kind], byKind, want)
		}
	}
	if want["acquire"]+want["takeover"] < 5 || want["release"] < 5 || byKind["heartbeat"] < 3*5 {
		t.Errorf("got %v; want at least 5 claims and 5 releases (3 nodes, 2 API holders) and their heartbeats", byKind)
	}

	type blockRow struct {
		Holder string `json:"holder"`
		N      int64  `json:"n,string"`
	}
	blocks, err := audit.Query[blockRow](ctx, ch, "SELECT holder, sum(count) AS n FROM "+ch.Table()+" FINAL WHERE kind = 'block' GROUP BY holder")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, b := range blocks {
		got[b.Holder] = b.N
	}
	for holder, n := range issued {
		if got[holder] != n {
			t.Errorf("%s: block records add up to %d IDs, want the %d it issued", holder, got[holder], n)
		}
	}
	if len(got) != len(issued) {
		t.Errorf("got block records of %v, want those of %v", got, issued)
	}
}
