package audit

import (
	"context"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

// Store is an allocator.Store reporting its callers' claims, heartbeats,
// releases, lost events, evictions, fetches and reported blocks to a
// Recorder. Failed calls report nothing but their blocks, which were
// issued either way. Behaviour is unchanged.
type Store struct {
	allocator.Store
	rec *Recorder
}

// WrapStore returns store reporting to rec.
func WrapStore(store allocator.Store, rec *Recorder) *Store { return &Store{Store: store, rec: rec} }

// Unwrap returns the store s reports on.
func (s *Store) Unwrap() allocator.Store { return s.Store }

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func leaseEvent(kind Kind, l allocator.Lease) Event {
	return Event{Kind: kind, Holder: l.Holder, Owner: l.Owner, DatacenterID: l.DatacenterID, WorkerID: l.WorkerID,
		FencingVersion: l.FencingVersion, FloorMS: l.FloorMS, CeilingMS: l.CeilingMS}
}

// Claim implements allocator.LeaseStore.Claim, recording the claim.
func (s *Store) Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, req)
	if err != nil {
		return res, err
	}
	kind, detail := allocator.ClaimEvent(res.PrevHolder, req.Holder, res.Lease.FencingVersion-1, res.PrevCeilingMS)
	ev := leaseEvent(Kind(kind), res.Lease)
	ev.Holder, ev.Owner, ev.RequestID, ev.Detail = req.Holder, req.Owner, req.RequestID, detail
	ev.FloorMS, ev.DBTimeMS = res.PrevCeilingMS+1, ms(res.DBNow)
	s.rec.Record(ev)
	return res, nil
}

// Heartbeat implements allocator.LeaseStore.Heartbeat, recording it.
func (s *Store) Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error) {
	s.block(req.Holder, req.Owner, req.Key, req.FencingVersion, req.Block)
	l, dbNow, err := s.Store.Heartbeat(ctx, req)
	if err != nil {
		return l, dbNow, err
	}
	ev := leaseEvent(KindHeartbeat, l)
	ev.Holder, ev.Owner, ev.RequestID, ev.DBTimeMS = req.Holder, req.Owner, req.RequestID, ms(dbNow)
	s.rec.Record(ev)
	return l, dbNow, nil
}

// Release implements allocator.LeaseStore.Release, recording it.
func (s *Store) Release(ctx context.Context, req allocator.ReleaseRequest) (int64, error) {
	s.block(req.Holder, req.Owner, req.Key, req.FencingVersion, req.Block)
	ceiling, err := s.Store.Release(ctx, req)
	if err != nil {
		return ceiling, err
	}
	s.rec.Record(Event{Kind: KindRelease, Holder: req.Holder, Owner: req.Owner, RequestID: req.RequestID,
		DatacenterID: req.Key.DatacenterID, WorkerID: req.Key.WorkerID, FencingVersion: req.FencingVersion,
		CeilingMS: ceiling, ToMS: req.LastTimestampMS})
	return ceiling, nil
}

// RecordLeaseEvent implements allocator.LeaseStore.RecordLeaseEvent,
// recording ev and its block once the store has.
func (s *Store) RecordLeaseEvent(ctx context.Context, ev allocator.LeaseEvent) error {
	s.block(ev.Holder, ev.Owner, ev.LeaseKey, ev.FencingVersion, ev.Block)
	if err := s.Store.RecordLeaseEvent(ctx, ev); err != nil {
		return err
	}
	s.rec.Record(Event{Kind: Kind(ev.Kind), Holder: ev.Holder, Owner: ev.Owner, RequestID: ev.RequestID,
		DatacenterID: ev.DatacenterID, WorkerID: ev.WorkerID, FencingVersion: ev.FencingVersion, Detail: ev.Detail})
	return nil
}

// Evict implements allocator.LeaseAdmin.Evict, recording the eviction with
// the holder read just before.
func (s *Store) Evict(ctx context.Context, req allocator.EvictRequest) (allocator.Lease, error) {
	var prev string
	if rows, lerr := s.Store.ListLeases(ctx); lerr == nil {
		for _, r := range rows {
			if r.LeaseKey == req.Key {
				prev = r.Holder
			}
		}
	}
	l, err := s.Store.Evict(ctx, req)
	if err != nil {
		return l, err
	}
	ev := leaseEvent(KindEvict, l)
	ev.Holder, ev.Owner, ev.RequestID = prev, req.Owner, req.RequestID
	ev.FencingVersion = l.FencingVersion - 1 // the version evicted, as the store's event names it
	ev.Detail = req.Reason
	s.rec.Record(ev)
	return l, nil
}

// FetchSegment implements allocator.SegmentStore.FetchSegment, recording it.
func (s *Store) FetchSegment(ctx context.Context, name string, n int64) (allocator.Segment, error) {
	seg, err := s.Store.FetchSegment(ctx, name, n)
	if err != nil {
		return seg, err
	}
	s.rec.Record(Event{Kind: KindSegmentFetch, Namespace: name, First: seg.First, Last: seg.Last, Count: seg.Last - seg.First + 1})
	return seg, nil
}

func (s *Store) block(holder, owner string, key allocator.LeaseKey, version int64, b allocator.Block) {
	s.rec.Block(BlockReport{Holder: holder, Owner: owner, LeaseKey: key, FencingVersion: version, Block: b})
}
