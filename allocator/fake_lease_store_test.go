package allocator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/idgen-project/idgen/snowflake"
)

// fakeLeaseStore is an in-memory LeaseStore that keeps the contract written
// on LeaseStore, on a store clock of the test's, for the keeper's unit
// tests. It counts calls and can fail them: down makes every call fail as
// if the database were unreachable (nothing is written).
type fakeLeaseStore struct {
	mu     sync.Mutex
	now    func() time.Time // store time
	layout snowflake.Layout // recorded by the first EnsureLayout
	rows   map[LeaseKey]Lease
	events []LeaseEvent
	down   error

	claims, heartbeats, releases int
}

var errFakeLeaseDown = errors.New("fake lease store: connection refused")

func newFakeLeaseStore(now func() time.Time) *fakeLeaseStore {
	return &fakeLeaseStore{now: now, rows: map[LeaseKey]Lease{}}
}

func (f *fakeLeaseStore) EnsureLayout(_ context.Context, l snowflake.Layout) (snowflake.Layout, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down != nil {
		return snowflake.Layout{}, f.down
	}
	if l.IsZero() {
		l = snowflake.DefaultLayout()
	}
	if f.layout.IsZero() {
		f.layout = l
	}
	return f.layout, nil
}

func (f *fakeLeaseStore) Claim(_ context.Context, req ClaimRequest) (ClaimResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims++
	if err := req.Validate(); err != nil {
		return ClaimResult{}, err
	}
	if f.down != nil {
		return ClaimResult{}, f.down
	}
	now := f.now()
	var cand []Lease
	for w := req.MinWorkerID; w <= req.MaxWorkerID; w++ {
		key := LeaseKey{DatacenterID: req.DatacenterID, WorkerID: w}
		row, ok := f.rows[key]
		if !ok {
			row = Lease{LeaseKey: key}
			f.rows[key] = row
		}
		free := row.Holder == "" || !row.ExpiresAt.After(now) || row.Holder == req.Holder
		if free && (req.MaxPrevCeilingMS == 0 || row.CeilingMS <= req.MaxPrevCeilingMS) {
			cand = append(cand, row)
		}
	}
	if len(cand) == 0 {
		return ClaimResult{}, fmt.Errorf("fake: datacenter %d, workers %d..%d: %w",
			req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, ErrNoWorkerAvailable)
	}
	sort.Slice(cand, func(i, j int) bool {
		if cand[i].CeilingMS != cand[j].CeilingMS {
			return cand[i].CeilingMS < cand[j].CeilingMS
		}
		return cand[i].WorkerID < cand[j].WorkerID
	})
	prev := cand[0]
	l := prev
	l.Holder, l.Owner = req.Holder, req.Owner
	l.FencingVersion++
	l.AcquiredAt, l.HeartbeatAt, l.ExpiresAt, l.ReleasedAt = now, now, now.Add(req.TTL), time.Time{}
	l.FloorMS = prev.CeilingMS + 1
	l.CeilingMS = boundCeiling(prev.CeilingMS, req.CeilingMS, now, req.TTL, req.MaxClockOffset)
	f.rows[l.LeaseKey] = l
	kind, detail := ClaimEvent(prev.Holder, req.Holder, prev.FencingVersion, prev.CeilingMS)
	f.record(LeaseEvent{LeaseKey: l.LeaseKey, Holder: req.Holder, FencingVersion: l.FencingVersion, Kind: kind, Detail: detail,
		Owner: req.Owner, RequestID: req.RequestID}, now)
	return ClaimResult{Lease: l, PrevHolder: prev.Holder, PrevCeilingMS: prev.CeilingMS, DBNow: now}, nil
}

// boundCeiling is the ceiling a claim or heartbeat leaves: the proposed one,
// no further than store time + ttl + offset, never below the stored one.
func boundCeiling(stored, proposed int64, now time.Time, ttl, offset time.Duration) int64 {
	return max(stored, min(proposed, now.UnixMilli()+ttl.Milliseconds()+offset.Milliseconds()))
}

func (f *fakeLeaseStore) Heartbeat(_ context.Context, req HeartbeatRequest) (Lease, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heartbeats++
	if err := req.Validate(); err != nil {
		return Lease{}, time.Time{}, err
	}
	if f.down != nil {
		return Lease{}, time.Time{}, f.down
	}
	now := f.now()
	l, ok := f.rows[req.Key]
	if !ok || l.Holder != req.Holder || l.FencingVersion != req.FencingVersion || !l.ExpiresAt.After(now) {
		return Lease{}, time.Time{}, fmt.Errorf("fake: heartbeat of worker %d by %q at version %d: %w",
			req.Key.WorkerID, req.Holder, req.FencingVersion, ErrLeaseLost)
	}
	l.HeartbeatAt, l.ExpiresAt = now, now.Add(req.TTL)
	l.CeilingMS = boundCeiling(l.CeilingMS, req.CeilingMS, now, req.TTL, req.MaxClockOffset)
	f.rows[req.Key] = l
	return l, now, nil
}

func (f *fakeLeaseStore) Release(_ context.Context, req ReleaseRequest) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releases++
	if err := req.Validate(); err != nil {
		return 0, err
	}
	if f.down != nil {
		return 0, f.down
	}
	now := f.now()
	l, ok := f.rows[req.Key]
	if !ok || l.Holder != req.Holder || l.FencingVersion != req.FencingVersion || !l.ExpiresAt.After(now) {
		return 0, fmt.Errorf("fake: release of worker %d by %q at version %d: %w",
			req.Key.WorkerID, req.Holder, req.FencingVersion, ErrLeaseLost)
	}
	ceiling, err := ReleaseCeiling(l.FloorMS, l.CeilingMS, req.LastTimestampMS)
	if err != nil {
		return 0, fmt.Errorf("fake: release of worker %d: %w", req.Key.WorkerID, err)
	}
	l.Holder, l.Owner, l.ReleasedAt, l.ExpiresAt = "", "", now, now
	l.CeilingMS = ceiling
	f.rows[req.Key] = l
	f.record(LeaseEvent{LeaseKey: req.Key, Holder: req.Holder, FencingVersion: req.FencingVersion, Kind: EventRelease,
		Detail: fmt.Sprintf("ceiling set to %d", ceiling), Owner: req.Owner, RequestID: req.RequestID}, now)
	return ceiling, nil
}

func (f *fakeLeaseStore) RecordLeaseEvent(_ context.Context, ev LeaseEvent) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := ev.Validate(); err != nil {
		return err
	}
	if f.down != nil {
		return f.down
	}
	f.record(ev, f.now())
	return nil
}

// record appends ev at time at; f.mu is held.
func (f *fakeLeaseStore) record(ev LeaseEvent, at time.Time) {
	ev.ID, ev.At = int64(len(f.events)+1), at
	f.events = append(f.events, ev)
}

func (f *fakeLeaseStore) setDown(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = err
}

// row returns the row of key (the zero Lease if there is none).
func (f *fakeLeaseStore) row(key LeaseKey) Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rows[key]
}

// setRow replaces a row, as another node's writes would.
func (f *fakeLeaseStore) setRow(l Lease) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rows[l.LeaseKey] = l
}

// kinds returns the kinds of the events recorded, oldest first.
func (f *fakeLeaseStore) kinds() []EventKind {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ks []EventKind
	for _, ev := range f.events {
		ks = append(ks, ev.Kind)
	}
	return ks
}

// counts returns the number of Claim, Heartbeat and Release calls so far.
func (f *fakeLeaseStore) counts() (claims, heartbeats, releases int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.claims, f.heartbeats, f.releases
}

// fakeTime is a test's time, which moves only when the test moves it: the
// store's time and the keepers' monotonic clocks all follow it.
type fakeTime struct {
	mu      sync.Mutex
	base    time.Time
	elapsed time.Duration
}

func newFakeTime() *fakeTime {
	return &fakeTime{base: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)}
}

func (ft *fakeTime) advance(d time.Duration) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.elapsed += d
}

// mono is a keeper's monotonic clock.
func (ft *fakeTime) mono() time.Duration {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.elapsed
}

// now is true time, which the store keeps.
func (ft *fakeTime) now() time.Time {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.base.Add(ft.elapsed)
}

// fakeWall is a node's wall clock on a fakeTime: true time plus a shift the
// test can step. Sleep moves the fakeTime forward.
type fakeWall struct {
	t     *fakeTime
	mu    sync.Mutex
	shift time.Duration
}

func (w *fakeWall) Now() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.t.now().Add(w.shift)
}

func (w *fakeWall) Sleep(d time.Duration) { w.t.advance(d) }

func (w *fakeWall) step(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.shift += d
}
