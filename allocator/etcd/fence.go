package etcd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idgen-project/idgen/allocator"
)

var _ allocator.RestoreFencer = (*Store)(nil)

// fenceRecord is the store's fence record (meta/fence), the SQL stores'
// store_fence row; created with a random store ID on first read.
type fenceRecord struct {
	StoreID    string    `json:"store_id"`
	Generation int64     `json:"generation"`
	CeilingMS  int64     `json:"ceiling_ms"` // the ceiling of worker records created after the last fence
	FencedAt   time.Time `json:"fenced_at,omitzero"`
	Detail     string    `json:"detail,omitempty"`
}

func (k keyspace) fence() string { return string(k) + "meta/fence" }

// readFence returns the fence record and its key, creating it if missing.
func (s *Store) readFence(ctx context.Context, cli *clientv3.Client) (fenceRecord, *mvccpb.KeyValue, error) {
	key := s.keys.fence()
	for {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return fenceRecord{}, nil, fmt.Errorf("etcd: read %s: %w", key, err)
		}
		if len(resp.Kvs) == 1 {
			var rec fenceRecord
			err := decode(key, resp.Kvs[0].Value, &rec)
			return rec, resp.Kvs[0], err
		}
		id := make([]byte, 16)
		_, _ = rand.Read(id)
		_, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, encode(fenceRecord{StoreID: hex.EncodeToString(id)}))).Commit()
		if err != nil {
			return fenceRecord{}, nil, fmt.Errorf("etcd: create %s: %w", key, err)
		}
	}
}

// FenceRestore implements allocator.RestoreFencer.FenceRestore key by key
// (--max-txn-ops limits a transaction), each a retried compare-and-swap:
// fence record, worker records, namespaces. Rerun to complete a cut-short one.
func (s *Store) FenceRestore(ctx context.Context, req allocator.FenceRequest) (allocator.FenceResult, error) {
	if err := req.Validate(); err != nil {
		return allocator.FenceResult{}, fmt.Errorf("etcd: %w", err)
	}
	var res allocator.FenceResult
	err := s.retry(ctx, "restore fence", func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		rec, kv, err := s.readFence(ctx, cli)
		if err != nil {
			return false, err
		}
		now, err := s.storeNow(ctx)
		if err != nil {
			return false, err
		}
		ceiling := req.Ceiling(now)
		next := rec
		next.Generation++
		next.CeilingMS = max(rec.CeilingMS, ceiling)
		next.FencedAt = now
		next.Detail = fmt.Sprintf("generation %d: worker records to ceiling %d, namespaces by %d", next.Generation, ceiling, req.Gap)
		if req.Owner != "" {
			next.Detail += ", by " + req.Owner
		}
		if req.Reason != "" {
			next.Detail += ": " + req.Reason
		}
		txn, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(s.keys.fence()), "=", kv.ModRevision)).
			Then(clientv3.OpPut(s.keys.fence(), encode(next))).Commit()
		if err != nil || !txn.Succeeded {
			return false, err
		}
		res = allocator.FenceResult{Generation: next.Generation, At: now, CeilingMS: ceiling}
		return true, nil
	})
	if err != nil {
		return allocator.FenceResult{}, fmt.Errorf("etcd: restore fence: %w", err)
	}
	workers, err := s.listPrefix(ctx, s.keys.leases())
	if err != nil {
		return allocator.FenceResult{}, err
	}
	for _, kv := range workers {
		var rec leaseRecord
		if err := decode(string(kv.Key), kv.Value, &rec); err != nil {
			return allocator.FenceResult{}, err
		}
		f, err := s.fenceWorker(ctx, req, res, allocator.LeaseKey{DatacenterID: rec.DatacenterID, WorkerID: rec.WorkerID})
		if err != nil {
			return allocator.FenceResult{}, err
		}
		res.Leases = append(res.Leases, f)
	}
	namespaces, err := s.listPrefix(ctx, s.keys.segments())
	if err != nil {
		return allocator.FenceResult{}, err
	}
	for _, kv := range namespaces {
		n, err := s.fenceNamespace(ctx, req, res.At, string(kv.Key))
		if err != nil {
			return allocator.FenceResult{}, err
		}
		res.Namespaces = append(res.Namespaces, n)
	}
	return res, nil
}

// listPrefix returns every key under prefix with its value, in key order.
func (s *Store) listPrefix(ctx context.Context, prefix string) ([]*mvccpb.KeyValue, error) {
	var kvs []*mvccpb.KeyValue
	err := s.retry(ctx, "read "+prefix, func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return false, err
		}
		kvs = resp.Kvs
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: read %s: %w", prefix, err)
	}
	return kvs, nil
}

// fenceWorker fences k's worker record in one compared transaction: next
// fencing version, no holder (its etcd lease revoked after), expiry at the
// fence's time, ceiling raised, fence event.
func (s *Store) fenceWorker(ctx context.Context, req allocator.FenceRequest, res allocator.FenceResult, k allocator.LeaseKey) (allocator.FencedLease, error) {
	var (
		out     allocator.FencedLease
		revoked clientv3.LeaseID
		unknown *leaseRecord // the record a try whose outcome is unknown fenced
	)
	err := s.retry(ctx, "restore fence", func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		w, err := s.readWorker(ctx, cli, k)
		if err != nil || w.kv == nil {
			return w.kv == nil && err == nil, err
		}
		if u := unknown; u != nil && w.row.FencingVersion == u.FencingVersion+1 && w.row.Holder == "" &&
			w.row.CeilingMS >= res.CeilingMS && w.row.AcquiredAt.Equal(u.AcquiredAt) {
			// Next version, no holder, the fence's ceiling: the try committed.
			out = allocator.FencedLease{Lease: w.row.lease(), PrevHolder: u.Holder, PrevCeilingMS: u.CeilingMS}
			return true, nil
		}
		prev := w.row.lease()
		row := w.row
		row.FencingVersion++
		row.Holder, row.Owner, row.SecretHash = "", "", ""
		row.ExpiresAt = maxTime(res.At, w.row.HeartbeatAt)
		row.CeilingMS = max(row.CeilingMS, res.CeilingMS)
		committed, uncertain, err := s.freeWorker(ctx, cli, "restore fence of", k, w, row, eventRecord{
			DatacenterID: k.DatacenterID, WorkerID: k.WorkerID, Holder: prev.Holder, FencingVersion: row.FencingVersion,
			Event: allocator.EventFence, At: res.At,
			Detail: allocator.FenceDetail(res.Generation, prev.FencingVersion, prev.CeilingMS, row.CeilingMS, req.Reason),
			Owner:  req.Owner, RequestID: req.RequestID,
		}, &revoked)
		if uncertain {
			unknown = &w.row
		}
		if committed {
			out = allocator.FencedLease{Lease: row.lease(), PrevHolder: prev.Holder, PrevCeilingMS: prev.CeilingMS}
		}
		return committed, err
	})
	if err != nil {
		return allocator.FencedLease{}, err
	}
	if revoked != 0 {
		s.revoke(ctx, revoked)
	}
	return out, nil
}

// fenceNamespace moves the counter of the namespace at key as
// allocator.FenceCounter says, in a retried compare-and-swap.
func (s *Store) fenceNamespace(ctx context.Context, req allocator.FenceRequest, at time.Time, key string) (allocator.FencedNamespace, error) {
	var out allocator.FencedNamespace
	err := s.retry(ctx, "restore fence of "+key, func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		resp, err := cli.Get(ctx, key)
		if err != nil || len(resp.Kvs) == 0 {
			return err == nil, err
		}
		var rec namespaceRecord
		if err := decode(key, resp.Kvs[0].Value, &rec); err != nil {
			return false, err
		}
		n := allocator.FencedNamespace{Name: rec.Namespace, PrevMaxID: rec.MaxID, PrevVersion: rec.Version,
			MaxIDLimit: rec.MaxIDLimit, Deleted: !rec.DeletedAt.IsZero()}
		n.MaxID, n.Version = allocator.FenceCounter(rec.MaxID, rec.MaxIDLimit, rec.Version, req.Gap)
		rec.MaxID, rec.Version, rec.UpdatedAt = n.MaxID, n.Version, maxTime(at, rec.UpdatedAt)
		txn, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)).
			Then(clientv3.OpPut(key, encode(rec))).Commit()
		if err != nil || !txn.Succeeded {
			return false, err
		}
		out = n
		return true, nil
	})
	if err != nil {
		return allocator.FencedNamespace{}, fmt.Errorf("etcd: restore fence: %w", err)
	}
	return out, nil
}

// StoreMark implements allocator.RestoreFencer.StoreMark from one revision.
func (s *Store) StoreMark(ctx context.Context) (allocator.StoreMark, error) {
	var m allocator.StoreMark
	err := s.retry(ctx, "read the store mark", func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		if _, _, err := s.readFence(ctx, cli); err != nil {
			return false, err
		}
		resp, err := cli.Txn(ctx).Then(
			clientv3.OpGet(s.keys.fence()),
			clientv3.OpGet(s.keys.leases(), clientv3.WithPrefix()),
			clientv3.OpGet(s.keys.segments(), clientv3.WithPrefix()),
		).Commit()
		if err != nil {
			return false, err
		}
		m = allocator.StoreMark{Ceilings: map[allocator.LeaseKey]int64{}, Counters: map[string]int64{}}
		var rec fenceRecord
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			if err := decode(s.keys.fence(), kvs[0].Value, &rec); err != nil {
				return false, err
			}
		}
		m.StoreID, m.Generation, m.CeilingMS = rec.StoreID, rec.Generation, rec.CeilingMS
		for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
			var row leaseRecord
			if err := decode(string(kv.Key), kv.Value, &row); err != nil {
				return false, err
			}
			m.Ceilings[allocator.LeaseKey{DatacenterID: row.DatacenterID, WorkerID: row.WorkerID}] = row.CeilingMS
		}
		for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
			var ns namespaceRecord
			if err := decode(string(kv.Key), kv.Value, &ns); err != nil {
				return false, err
			}
			m.Counters[ns.Namespace] = ns.MaxID
		}
		return true, nil
	})
	if err != nil {
		return allocator.StoreMark{}, fmt.Errorf("etcd: store mark: %w", err)
	}
	return m, nil
}
