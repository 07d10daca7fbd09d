package etcd

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idgen-project/idgen/allocator"
)

// The operators' side of the lease records: events, pruning, eviction.

// eventPage is how many event keys one read takes.
const eventPage = 128

// pruneSlack bounds how far apart in store time events close in ID order
// can lie (store time is clamped into a ~1s window). PruneLeaseEvents stops
// at an event pruneSlack past its bound, so it never deletes too early.
const pruneSlack = time.Minute

// ListLeaseEvents implements allocator.LeaseAdmin.ListLeaseEvents. etcd has
// only the key (ID) order, so it pages through events after f.AfterID and
// filters them.
func (s *Store) ListLeaseEvents(ctx context.Context, f allocator.LeaseEventFilter) ([]allocator.LeaseEvent, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	if f.Limit <= 0 {
		return nil, nil
	}
	var events []allocator.LeaseEvent
	err := s.scanEvents(ctx, f.AfterID, func(ev eventRecord) bool {
		if selects(f, ev) {
			events = append(events, ev.event())
		}
		return len(events) < f.Limit
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: list lease events: %w", err)
	}
	return events, nil
}

// selects reports whether f selects ev (leaving out AfterID and Limit).
func selects(f allocator.LeaseEventFilter, ev eventRecord) bool {
	switch {
	case f.DatacenterID != nil && ev.DatacenterID != *f.DatacenterID,
		f.WorkerID != nil && ev.WorkerID != *f.WorkerID,
		f.Holder != "" && ev.Holder != f.Holder,
		f.Owner != "" && ev.Owner != f.Owner,
		f.Kind != "" && ev.Event != f.Kind,
		!f.Since.IsZero() && ev.At.Before(f.Since),
		!f.Until.IsZero() && !ev.At.Before(f.Until):
		return false
	}
	return true
}

// scanEvents calls fn with the events after afterID in ID order, a page
// at a time, until fn returns false or the events end.
func (s *Store) scanEvents(ctx context.Context, afterID int64, fn func(eventRecord) bool) error {
	from, end := s.keys.event(max(afterID, 0)+1), rangeEnd(s.keys.events())
	for {
		resp, err := s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(eventPage))
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			var ev eventRecord
			if err := decode(string(kv.Key), kv.Value, &ev); err != nil {
				return err
			}
			if !fn(ev) {
				return nil
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// PruneLeaseEvents implements allocator.LeaseAdmin.PruneLeaseEvents,
// deleting in ID order, createBatch keys per transaction, until an event
// pruneSlack past before. The sequence key stays, so IDs are never reused.
func (s *Store) PruneLeaseEvents(ctx context.Context, before time.Time) (int64, error) {
	if before.IsZero() {
		return 0, nil
	}
	var (
		total int64
		batch []clientv3.Op
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		resp, err := s.cli.Txn(ctx).Then(batch...).Commit()
		if err != nil {
			return err
		}
		for _, r := range resp.Responses {
			total += r.GetResponseDeleteRange().Deleted
		}
		batch = batch[:0]
		return nil
	}
	var flushErr error
	err := s.scanEvents(ctx, 0, func(ev eventRecord) bool {
		if !ev.At.Before(before.Add(pruneSlack)) {
			return false
		}
		if ev.At.Before(before) {
			batch = append(batch, clientv3.OpDelete(s.keys.event(ev.ID)))
			if len(batch) == createBatch {
				flushErr = flush()
			}
		}
		return flushErr == nil
	})
	if err == nil {
		err = flushErr
	}
	if err == nil {
		err = flush()
	}
	if err != nil {
		return total, fmt.Errorf("etcd: prune lease events: %w", err)
	}
	return total, nil
}

// Evict implements allocator.LeaseAdmin.Evict in one compared transaction:
// next fencing version, no holder, holder key deleted (its etcd lease
// revoked after), event appended.
func (s *Store) Evict(ctx context.Context, req allocator.EvictRequest) (allocator.Lease, error) {
	if err := req.Validate(); err != nil {
		return allocator.Lease{}, fmt.Errorf("etcd: %w", err)
	}
	k := req.Key
	var (
		out     allocator.Lease
		revoked clientv3.LeaseID
		unknown *leaseRecord // the record a try whose outcome is unknown evicted
	)
	err := s.retry(ctx, "evict", func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		w, err := s.readWorker(ctx, cli, k)
		if err != nil {
			return false, err
		}
		if u := unknown; u != nil && w.kv != nil && w.row.Holder == "" && w.row.FencingVersion == u.FencingVersion+1 &&
			w.row.AcquiredAt.Equal(u.AcquiredAt) && w.row.ReleasedAt.IsZero() {
			// Next version, no holder, same times: the uncertain try committed.
			out = w.row.lease()
			return true, nil
		}
		prev := w.row.lease()
		if err := req.CheckRow(prev, w.kv != nil); err != nil {
			return false, fmt.Errorf("etcd: %w", err)
		}
		now, err := s.storeNow(ctx)
		if err != nil {
			return false, err
		}
		row := w.row
		row.FencingVersion++
		row.Holder, row.Owner, row.SecretHash = "", "", ""
		row.ExpiresAt = maxTime(now, w.row.HeartbeatAt)
		committed, uncertain, err := s.freeWorker(ctx, cli, "evict", k, w, row, eventRecord{
			DatacenterID: k.DatacenterID, WorkerID: k.WorkerID, Holder: prev.Holder, FencingVersion: prev.FencingVersion,
			Event: allocator.EventEvict, At: now, Detail: allocator.EvictDetail(prev, req.Reason),
			Owner: req.Owner, RequestID: req.RequestID,
		}, &revoked)
		if uncertain {
			unknown = &w.row
		}
		if committed {
			out = row.lease()
		}
		return committed, err
	})
	if err != nil {
		return allocator.Lease{}, err
	}
	if revoked != 0 {
		s.revoke(ctx, revoked)
	}
	return out, nil
}
