package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idgen-project/idgen"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/snowflake"
)

// Settings of the multi-process test: every lease (the nodes' and the
// holders') has a 3 s ttl and a heartbeat every second.
const (
	ttl        = 3 * time.Second
	heartbeat  = time.Second
	tokenName  = "gens"
	tokenValue = "multi-process-test-secret"
	adminToken = "multi-process-admin-token"
)

// TestMultiProcess runs, on each database, two idgen nodes and eight holder
// processes (client.Generator) on ten worker IDs (two for the nodes, eight
// for the lease API), and then:
//
//   - kills one holder with SIGKILL and starts a spare: its worker ID is
//     taken over, with a floor above the dead holder's last committed
//     ceiling;
//   - stops another with SIGSTOP past its lease and starts a second spare:
//     its worker ID is taken over likewise; then resumes it: it issues
//     nothing under its old lease, refuses, and issues again only under a
//     new lease once a worker ID is released for it;
//   - evicts a third through the admin API: it learns of it from a
//     heartbeat, issues nothing under the evicted lease past the deadline
//     its last heartbeat gave it, and leases again;
//   - stops everything gracefully.
//
// Which process takes a worker ID over is not fixed: the spare, or on a
// loaded machine a process whose heartbeats stalled past the 3 s ttl and
// whose worker ID the spare took first. The checks hold whoever it is.
//
// Every ID made (the holders' and the nodes' GET /ids) must be unique, and
// the IDs of successive leases of one worker ID must have increasing
// timestamps.
func TestMultiProcess(t *testing.T) {
	idgen, holder := buildBinaries(t, t.TempDir())
	for _, dialect := range testserver.Dialects {
		t.Run(dialect, func(t *testing.T) { runMultiProcess(t, dialect, idgen, holder) })
	}
}

// eventCeiling reads the previous ceiling a claim event's detail names.
var eventCeiling = regexp.MustCompile(`previous ceiling (\d+)`)

func runMultiProcess(t *testing.T, dialect, idgenBin, holderBin string) {
	began := time.Now()
	dir := t.TempDir()
	if keep := os.Getenv("IDGEN_MULTIPROCESS_LOGS"); keep != "" {
		dir = filepath.Join(keep, dialect)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dsn := testserver.StoreDSN(t, dialect)
	store := testserver.OpenStoreDSN(t, dsn) // migrated here: the nodes start on a migrated database
	ctx := context.Background()
	tokens := filepath.Join(dir, "tokens")
	line := fmt.Sprintf("%s ids,leases %s\n", tokenName, idgen.HashSecret(tokenValue))
	if err := os.WriteFile(tokens, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	// The nodes claim worker IDs 0-1, the holders 2-9 (the lease API's
	// pool, apart from the nodes').
	nodeArgs := []string{"--dsn", dsn, "--worker-ids", "0-1", "--lease-api-worker-ids", "2-9", "--tokens-file", tokens, "--admin-token", adminToken, "--migrate=false"}
	nodes := []*node{startNode(t, idgenBin, dir, "node-a", nodeArgs...), startNode(t, idgenBin, dir, "node-b", nodeArgs...)}
	loads := []*idLoad{startIDLoad(nodes[0], tokenValue), startIDLoad(nodes[1], tokenValue)}

	holderArgs := []string{"--workers", "2-9", "--ttl", ttl.String(), "--heartbeat", heartbeat.String()}
	gens := map[string]*holderProc{}
	start := func(name string, n *node) *holderProc {
		h := startHolder(t, holderBin, dir, name, n.url, tokenValue, holderArgs...)
		gens[name] = h
		return h
	}
	leased := func(h *holderProc) {
		t.Helper()
		testkit.WaitFor(t, 30*time.Second, h.holder+" holding a lease", func() bool {
			if h.Exited() {
				t.Fatalf("%s exited:\n%s", h.holder, h.Tail(20))
			}
			_, ok := h.read(t).lastLease()
			return ok
		})
	}
	for i := range 8 {
		start(fmt.Sprintf("gen-%d", i), nodes[i%2])
	}
	for i := range 8 {
		leased(gens[fmt.Sprintf("gen-%d", i)])
	}
	time.Sleep(2 * time.Second)

	// kill -9 gen-2; its worker ID is taken over once the lease expires,
	// starting above its last committed ceiling. The spare gen-8 is there
	// to take it, but on a loaded machine another process's heartbeats can
	// stall past the 3 s ttl too: then gen-8 may take that process's
	// worker ID first and that process gen-2's. Whoever takes gen-2's
	// worker ID must start above it.
	dead := gens["gen-2"]
	deadLease, _ := dead.read(t).lastLease()
	dead.Kill9(t)
	killedAt := time.Now()
	spare := start("gen-8", nodes[0])
	leased(spare)
	takeover, deadCeiling := takenOver(t, store, allocator.RemoteHolderPrefix+tokenName+"/gen-2", deadLease.worker, deadLease.version)
	deadMax := maxTS(dead.read(t), deadLease.worker, deadLease.version)
	if deadMax > deadCeiling {
		t.Errorf("kill: gen-2 issued up to %d on worker %d, above the ceiling %d its successor %s started above",
			deadMax, deadLease.worker, deadCeiling, takeover.Holder)
	}
	checkFloor(t, gens, takeover, deadCeiling)
	t.Logf("kill: gen-2 (worker %d v%d) issued up to %d, committed ceiling %d; %s took over %s after the kill at v%d",
		deadLease.worker, deadLease.version, deadMax, deadCeiling, takeover.Holder, takeover.At.Sub(killedAt).Round(time.Millisecond), takeover.FencingVersion)

	// SIGSTOP gen-5 past its lease; its worker ID is taken over (by the
	// spare gen-9, or as above by a process whose lease expired under load
	// while gen-9 took its worker ID); SIGCONT: gen-5 issues nothing until
	// it holds a new lease.
	paused := gens["gen-5"]
	pausedLease, _ := paused.read(t).lastLease()
	paused.Signal(t, syscall.SIGSTOP)
	stoppedAt := time.Now()
	spare2 := start("gen-9", nodes[1])
	leased(spare2)
	pauseTakeover, pausedCeiling := takenOver(t, store, allocator.RemoteHolderPrefix+tokenName+"/gen-5", pausedLease.worker, pausedLease.version)
	checkFloor(t, gens, pauseTakeover, pausedCeiling)
	time.Sleep(time.Until(stoppedAt.Add(2 * ttl)))
	paused.Signal(t, syscall.SIGCONT)
	resumedAt := time.Now()
	time.Sleep(2 * time.Second) // the pool is full: gen-5 refuses
	// gen-0 releases its worker ID for gen-5.
	freed := gens["gen-0"]
	if code := freed.Stop(15 * time.Second); code != 0 {
		t.Fatalf("gen-0 exited %d after SIGTERM:\n%s", code, freed.Tail(10))
	}
	freedAt := time.Now()
	var newLease leaseLine
	testkit.WaitFor(t, 30*time.Second, "gen-5 on a new lease", func() bool {
		l, _ := paused.read(t).lastLease()
		newLease = l
		return l.version != pausedLease.version || l.worker != pausedLease.worker
	})
	testkit.WaitFor(t, 30*time.Second, "gen-5 issuing under its new lease", func() bool {
		return countBatches(paused.read(t), newLease.worker, newLease.version, resumedAt) > 0
	})
	po := paused.read(t)
	var staleBatches, refusedAfterResume int
	var firstNew time.Time
	for _, b := range po.batches {
		if b.worker == pausedLease.worker && b.version == pausedLease.version && !b.send.Before(resumedAt) {
			staleBatches++
		}
		if !b.send.Before(resumedAt) && b.worker == newLease.worker && b.version == newLease.version && firstNew.IsZero() {
			firstNew = b.send
		}
	}
	for _, r := range po.refusals {
		if !r.at.Before(resumedAt) && r.at.Before(firstNew) {
			refusedAfterResume++
		}
	}
	if staleBatches > 0 || refusedAfterResume == 0 {
		t.Errorf("pause: gen-5 made %d batches under its old lease after SIGCONT (want 0) and refused %d times before its new lease (want some)",
			staleBatches, refusedAfterResume)
	}
	if pausedMax := maxTS(po, pausedLease.worker, pausedLease.version); pausedCeiling < pausedMax {
		t.Errorf("pause: %s took worker %d above ceiling %d, not above gen-5's last timestamp %d there",
			pauseTakeover.Holder, pausedLease.worker, pausedCeiling, pausedMax)
	}
	t.Logf("pause: stopped %s; %s took worker %d at v%d; after SIGCONT gen-5 refused %d times, then issued under worker %d v%d from %s after gen-0 released",
		resumedAt.Sub(stoppedAt).Round(time.Millisecond), pauseTakeover.Holder, pausedLease.worker, pauseTakeover.FencingVersion, refusedAfterResume,
		newLease.worker, newLease.version, firstNew.Sub(freedAt).Round(time.Millisecond))

	// Evict gen-6 through the admin API: the lease it holds now (under load
	// it may have moved since its first), fenced on its version.
	evicted := gens["gen-6"]
	var evLease leaseLine
	testkit.WaitFor(t, 30*time.Second, "the eviction of gen-6's lease", func() bool {
		evLease, _ = evicted.read(t).lastLease()
		body := strings.NewReader(fmt.Sprintf(`{"fencing_version":%d}`, evLease.version))
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/admin/leases/0/%d/evict", nodes[0].url, evLease.worker), body)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			return true
		case http.StatusConflict: // the lease moved on before the eviction: read it again
			return false
		}
		t.Fatalf("evict: status %d", resp.StatusCode)
		return false
	})
	evictedAt := time.Now()
	testkit.WaitFor(t, 30*time.Second, "gen-6 on a new lease", func() bool {
		l, _ := evicted.read(t).lastLease()
		return l.version != evLease.version || l.worker != evLease.worker
	})
	evictEv := findEvent(t, store, allocator.EventEvict, allocator.RemoteHolderPrefix+tokenName+"/gen-6", evLease.worker, evLease.version)
	// The holder learns of the eviction from a heartbeat, which records the
	// loss.
	lostEv := findEvent(t, store, allocator.EventLost, allocator.RemoteHolderPrefix+tokenName+"/gen-6", evLease.worker, evLease.version)
	var lastSend time.Time
	for _, b := range evicted.read(t).batches {
		if b.worker == evLease.worker && b.version == evLease.version && b.send.After(lastSend) {
			lastSend = b.send
		}
	}
	// Its last successful heartbeat was sent before the eviction, and its
	// local deadline lies less than a ttl after that: nothing is issued
	// under the evicted lease later, however late the next heartbeat is
	// answered on a loaded machine.
	if d := lastSend.Sub(evictedAt); d >= ttl {
		t.Errorf("evict: gen-6 still issued under the evicted lease %s after the eviction, want less than the ttl %s", d, ttl)
	}
	t.Logf("evict: gen-6 (worker %d v%d) lost its lease %s after the eviction (database time); its last batch under it was sent %s after",
		evLease.worker, evLease.version, lostEv.At.Sub(evictEv.At).Round(time.Millisecond), lastSend.Sub(evictedAt).Round(time.Millisecond))

	time.Sleep(time.Second)
	// Graceful stop: every holder that still holds its lease releases it
	// with the last timestamp it used.
	outputs := map[string]holderOutput{}
	stopsBegan := time.Now()
	for name, h := range gens {
		if h.Exited() {
			continue
		}
		if code := h.Stop(15 * time.Second); code != 0 {
			t.Errorf("%s exited %d after SIGTERM:\n%s", name, code, h.Tail(10))
		}
	}
	rows, err := store.ListLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range gens {
		o := h.read(t)
		outputs[name] = o
		if name == "gen-2" {
			continue // killed
		}
		l, _ := o.lastLease()
		// A release refused as lease_lost: the lease expired (heartbeats
		// stalled past the ttl on a loaded machine) and was taken over
		// before the stop. Close reports that, as documented.
		lostAtStop := strings.Contains(o.closed, "lease_lost")
		if o.closed != "ok" && !lostAtStop {
			t.Errorf("%s: closed %q, want ok (or a release refused as lease_lost)", name, o.closed)
			continue
		}
		row := rowOf(rows, l.worker)
		if row.FencingVersion != l.version {
			continue // leased again since (gen-0's worker ID)
		}
		want := maxTS(o, l.worker, l.version)
		if want == 0 {
			want = l.floor - 1
		}
		// expiredAtStop: its lease had run out before the stops began (no
		// heartbeat for a ttl), so its release was refused as lost, which
		// Close takes as nothing left to give back.
		expiredAtStop := row.Holder != "" && row.ExpiresAt.Before(stopsBegan)
		if row.Holder != "" && (lostAtStop || expiredAtStop || lostLease(t, store, o, allocator.RemoteHolderPrefix+tokenName+"/"+name, l)) {
			// Its heartbeats stalled past the ttl (a loaded machine) and it
			// lost the lease before it stopped: nothing to release, but the
			// ceiling still covers every timestamp it used.
			if row.CeilingMS < want {
				t.Errorf("%s: worker %d, lost before the stop: ceiling %d below its last timestamp %d", name, l.worker, row.CeilingMS, want)
			}
			continue
		}
		if row.Holder != "" || row.CeilingMS != want {
			t.Errorf("%s: worker %d after its release: holder %q ceiling %d; want free at its last timestamp %d", name, l.worker, row.Holder, row.CeilingMS, want)
		}
	}
	var all []int64
	for _, l := range loads {
		ids, errs := l.stop()
		all = append(all, ids...)
		for _, e := range errs {
			t.Errorf("node load: %s", e)
		}
	}
	nodeIDs := len(all)
	for _, n := range nodes {
		if code := n.Stop(15 * time.Second); code != 0 {
			t.Errorf("%s exited %d after SIGTERM:\n%s", n.Name, code, n.Tail(10))
		}
	}

	// Uniqueness over everything, and the fence between successive
	// leases of each worker ID.
	layout := snowflake.DefaultLayout()
	type tenure struct{ worker, version int64 }
	span := map[tenure][2]int64{}
	genIDs, unattributed := 0, 0
	for name, o := range outputs {
		for _, b := range o.batches {
			all = append(all, b.ids...)
			genIDs += len(b.ids)
			for _, id := range b.ids {
				p := layout.Decompose(snowflake.ID(id))
				if b.worker >= 0 && p.Worker != b.worker {
					t.Errorf("%s: ID %d of worker %d in a batch of worker %d", name, id, p.Worker, b.worker)
				}
				k := tenure{p.Worker, b.version}
				if b.worker < 0 {
					unattributed++ // a batch across a change of lease: in the uniqueness check only
					continue
				}
				ts := p.Time.UnixMilli()
				s, ok := span[k]
				if !ok {
					s = [2]int64{ts, ts}
				}
				span[k] = [2]int64{min(s[0], ts), max(s[1], ts)}
			}
		}
	}
	sorted := slices.Clone(all)
	slices.Sort(sorted)
	dups := len(sorted) - len(slices.Compact(sorted))
	if dups != 0 {
		t.Errorf("%d duplicate IDs among %d", dups, len(all))
	}
	keys := make([]tenure, 0, len(span))
	for k := range span {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b tenure) int {
		if a.worker != b.worker {
			return int(a.worker - b.worker)
		}
		return int(a.version - b.version)
	})
	for i := 1; i < len(keys); i++ {
		a, b := keys[i-1], keys[i]
		if a.worker == b.worker && span[b][0] <= span[a][1] {
			t.Errorf("worker %d: version %d issued from %d, not above version %d's %d", b.worker, b.version, span[b][0], a.version, span[a][1])
		}
	}
	t.Logf("multi-process %s: %d IDs (%d from 10 holder processes, %d of them in batches across a change of lease; %d from 2 nodes), %d duplicates, %d holder tenures, took %s",
		dialect, len(all), genIDs, unattributed, nodeIDs, dups, len(keys), time.Since(began).Round(time.Second))
}

// findEvent returns the event of kind for holder on worker at version,
// waiting (bounded) for it to be recorded.
func findEvent(t *testing.T, store stores.Store, kind allocator.EventKind, holder string, worker, version int64) allocator.LeaseEvent {
	t.Helper()
	return waitEvent(t, store, kind, worker, fmt.Sprintf("a %s event of %s on worker %d v%d", kind, holder, worker, version),
		func(ev allocator.LeaseEvent) bool { return ev.Holder == holder && ev.FencingVersion == version })
}

// waitEvent returns the first event of kind on worker that match accepts,
// waiting for it (bounded: a hang, not a slow machine, fails it).
func waitEvent(t *testing.T, store stores.Store, kind allocator.EventKind, worker int64, what string, match func(allocator.LeaseEvent) bool) allocator.LeaseEvent {
	t.Helper()
	var found allocator.LeaseEvent
	testkit.WaitFor(t, 30*time.Second, what, func() bool {
		evs, err := store.ListLeaseEvents(context.Background(), allocator.LeaseEventFilter{Kind: kind, WorkerID: &worker, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if match(ev) {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// takenOver waits (bounded) for the claim that took worker over from
// holder (as the broker names it) at version, whoever made it, and returns
// its event and the previous ceiling it names: the new holder's floor is
// one above it.
func takenOver(t *testing.T, store stores.Store, holder string, worker, version int64) (allocator.LeaseEvent, int64) {
	t.Helper()
	from := fmt.Sprintf("taken over from %s at version %d,", holder, version)
	ev := waitEvent(t, store, allocator.EventTakeover, worker, fmt.Sprintf("the takeover of worker %d from %s v%d", worker, holder, version),
		func(ev allocator.LeaseEvent) bool {
			return ev.FencingVersion == version+1 && strings.Contains(ev.Detail, from)
		})
	m := eventCeiling.FindStringSubmatch(ev.Detail)
	if m == nil {
		t.Fatalf("takeover event detail %q names no previous ceiling", ev.Detail)
	}
	ceiling, _ := strconv.ParseInt(m[1], 10, 64)
	return ev, ceiling
}

// checkFloor checks, when a holder process of gens made the takeover, that
// the floor it reported for the lease is one above the previous ceiling
// (an idgen node's keeper reports it in its log only).
func checkFloor(t *testing.T, gens map[string]*holderProc, takeover allocator.LeaseEvent, prevCeiling int64) {
	t.Helper()
	name, ok := strings.CutPrefix(takeover.Holder, allocator.RemoteHolderPrefix+tokenName+"/")
	h := gens[name]
	if !ok || h == nil {
		return
	}
	var l leaseLine
	testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("%s reporting worker %d v%d", name, takeover.WorkerID, takeover.FencingVersion), func() bool {
		for _, l = range h.read(t).leases {
			if l.worker == takeover.WorkerID && l.version == takeover.FencingVersion {
				return true
			}
		}
		return false
	})
	if l.floor != prevCeiling+1 {
		t.Errorf("%s took worker %d over at v%d with floor %d, want the previous ceiling %d + 1",
			name, takeover.WorkerID, takeover.FencingVersion, l.floor, prevCeiling)
	}
}

// lostLease reports whether the holder (as the broker names it) lost lease
// l: a lost event says so (the broker and the holder's keeper each record
// one), or the holder refused for want of a lease after it last reported l.
func lostLease(t *testing.T, store stores.Store, o holderOutput, holder string, l leaseLine) bool {
	t.Helper()
	evs, err := store.ListLeaseEvents(context.Background(), allocator.LeaseEventFilter{Kind: allocator.EventLost, WorkerID: &l.worker, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Holder == holder && ev.FencingVersion == l.version {
			return true
		}
	}
	for _, r := range o.refusals {
		if r.reason == "no_lease" && r.at.After(l.at) {
			return true
		}
	}
	return false
}

// maxTS is the highest timestamp of the IDs a holder issued under a lease,
// 0 if none.
func maxTS(o holderOutput, worker, version int64) int64 {
	var m int64
	layout := snowflake.DefaultLayout()
	for _, b := range o.batches {
		if b.worker == worker && b.version == version {
			for _, id := range b.ids {
				m = max(m, layout.Decompose(snowflake.ID(id)).Time.UnixMilli())
			}
		}
	}
	return m
}

// countBatches counts the batches under a lease sent at or after from.
func countBatches(o holderOutput, worker, version int64, from time.Time) int {
	n := 0
	for _, b := range o.batches {
		if b.worker == worker && b.version == version && !b.send.Before(from) {
			n++
		}
	}
	return n
}

func rowOf(rows []allocator.Lease, worker int64) allocator.Lease {
	for _, r := range rows {
		if r.DatacenterID == 0 && r.WorkerID == worker {
			return r
		}
	}
	return allocator.Lease{}
}
