package etcd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// createBatch is how many worker records one transaction creates (etcd
// allows 128 operations by default).
const createBatch = 64

// EnsureLayout records layout (default when zero) unless one is recorded,
// and returns the recorded one; of concurrent first calls exactly one wins.
func (s *Store) EnsureLayout(ctx context.Context, layout snowflake.Layout) (snowflake.Layout, error) {
	if layout.IsZero() {
		layout = snowflake.DefaultLayout()
	}
	now, err := s.storeNow(ctx)
	if err != nil {
		return snowflake.Layout{}, err
	}
	rec := layoutRecord{
		TimeBits: layout.TimeBits, DatacenterBits: layout.DatacenterBits,
		WorkerBits: layout.WorkerBits, SequenceBits: layout.SequenceBits,
		EpochMS: layout.EpochMillis(), Epoch: time.UnixMilli(layout.EpochMillis()).UTC(), CreatedAt: now,
	}
	key := s.keys.layout()
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, encode(rec))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return snowflake.Layout{}, fmt.Errorf("etcd: record snowflake layout: %w", err)
	}
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) != 1 {
			return snowflake.Layout{}, fmt.Errorf("etcd: read snowflake layout: key %s vanished", key)
		}
		if err := decode(key, kvs[0].Value, &rec); err != nil {
			return snowflake.Layout{}, err
		}
	}
	return rec.layout(), nil
}

// leaseSeconds is the etcd lease ttl for ttl, rounded up to whole seconds
// so etcd never expires it before the holder's deadline.
func leaseSeconds(ttl time.Duration) int64 {
	return int64((ttl + time.Second - 1) / time.Second)
}

// pool is what a claim reads of a pool of worker IDs, in one snapshot.
type pool struct {
	rows    []*mvccpb.KeyValue          // worker records, by worker ID
	holders map[string]*mvccpb.KeyValue // holder keys by key (every holder key with all)
	seq     *mvccpb.KeyValue            // the event sequence, nil before the first event
	// all is every worker record, read only for a capped owner.
	all []*mvccpb.KeyValue
}

// readPool reads a pool's worker records and holder keys and the event
// sequence at one revision (with all, every record). The claim compares
// the event sequence, so what it counted here cannot change before commit.
func (s *Store) readPool(ctx context.Context, cli *clientv3.Client, dc, minID, maxID int64, all bool) (pool, error) {
	holders := clientv3.OpGet(s.keys.holder(dc, minID), clientv3.WithRange(s.keys.holder(dc, maxID+1)))
	if all {
		holders = clientv3.OpGet(s.keys.holders(), clientv3.WithPrefix())
	}
	ops := []clientv3.Op{
		clientv3.OpGet(s.keys.worker(dc, minID), clientv3.WithRange(s.keys.worker(dc, maxID+1))),
		holders,
		clientv3.OpGet(s.keys.eventSeq()),
	}
	if all {
		ops = append(ops, clientv3.OpGet(s.keys.leases(), clientv3.WithPrefix()))
	}
	resp, err := cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return pool{}, fmt.Errorf("etcd: read worker IDs %d/%d..%d: %w", dc, minID, maxID, err)
	}
	p := pool{rows: resp.Responses[0].GetResponseRange().Kvs, holders: map[string]*mvccpb.KeyValue{}}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		p.holders[string(kv.Key)] = kv
	}
	if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) == 1 {
		p.seq = kvs[0]
	}
	if all {
		p.all = resp.Responses[3].GetResponseRange().Kvs
	}
	return p, nil
}

// owned counts owner's live leases in p.all at now, other than holder's.
func (s *Store) owned(p pool, owner, holder string, now time.Time) (int, error) {
	n := 0
	for _, kv := range p.all {
		var row leaseRecord
		if err := decode(string(kv.Key), kv.Value, &row); err != nil {
			return 0, err
		}
		if row.Owner != owner || row.Holder == "" || row.Holder == holder || !now.Before(row.ExpiresAt) {
			continue
		}
		if p.holders[s.keys.holder(row.DatacenterID, row.WorkerID)] != nil {
			n++
		}
	}
	return n, nil
}

// nextEvent returns the event sequence's compare and the ops appending ev.
func (s *Store) nextEvent(seq *mvccpb.KeyValue, ev eventRecord) (clientv3.Cmp, []clientv3.Op, error) {
	var last, rev int64
	if seq != nil {
		n, err := strconv.ParseInt(string(seq.Value), 10, 64)
		if err != nil {
			return clientv3.Cmp{}, nil, fmt.Errorf("etcd: key %s holds no event number: %q", s.keys.eventSeq(), seq.Value)
		}
		last, rev = n, seq.ModRevision
	}
	ev.ID = last + 1
	return clientv3.Compare(clientv3.ModRevision(s.keys.eventSeq()), "=", rev), []clientv3.Op{
		clientv3.OpPut(s.keys.eventSeq(), strconv.FormatInt(ev.ID, 10)),
		clientv3.OpPut(s.keys.event(ev.ID), encode(ev)),
	}, nil
}

// modRev returns kv's mod revision, 0 for an absent key.
func modRev(kv *mvccpb.KeyValue) int64 {
	if kv == nil {
		return 0
	}
	return kv.ModRevision
}

// workerTxn is the transaction of a claim, release or eviction of one
// worker ID: it writes row and holder (deleting the holder key when nil)
// and the event ops, if neither key changed since rowRev and holderRev
// and the event sequence is as seqCmp expects.
type workerTxn struct {
	key               allocator.LeaseKey
	rowRev, holderRev int64
	row               leaseRecord
	holder            *holderRecord
	lease             clientv3.LeaseID
	seqCmp            clientv3.Cmp
	evOps             []clientv3.Op
}

// commit runs t on cli; the response says whether it committed.
func (t workerTxn) commit(ctx context.Context, cli *clientv3.Client, keys keyspace) (*clientv3.TxnResponse, error) {
	rowKey, holderKey := keys.worker(t.key.DatacenterID, t.key.WorkerID), keys.holder(t.key.DatacenterID, t.key.WorkerID)
	holderOp := clientv3.OpDelete(holderKey)
	if t.holder != nil {
		holderOp = clientv3.OpPut(holderKey, encode(*t.holder), clientv3.WithLease(t.lease))
	}
	return cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(rowKey), "=", t.rowRev),
		clientv3.Compare(clientv3.ModRevision(holderKey), "=", t.holderRev),
		t.seqCmp,
	).Then(append([]clientv3.Op{clientv3.OpPut(rowKey, encode(t.row)), holderOp}, t.evOps...)...).Commit()
}

// freeWorker runs a release or eviction (op) of worker k, read as w, and
// reports whether it committed. Once run, *revoke is the etcd lease of the
// deleted holder key, for the caller to revoke. A transaction error (it
// may have committed unseen) comes wrapped with uncertain true.
func (s *Store) freeWorker(ctx context.Context, cli *clientv3.Client, op string, k allocator.LeaseKey, w worker,
	row leaseRecord, ev eventRecord, revoke *clientv3.LeaseID) (committed, uncertain bool, err error) {
	seqCmp, evOps, err := s.nextEvent(w.seq, ev)
	if err != nil {
		return false, false, err
	}
	resp, err := workerTxn{
		key: k, rowRev: w.kv.ModRevision, holderRev: modRev(w.hkv), row: row, seqCmp: seqCmp, evOps: evOps,
	}.commit(ctx, cli, s.keys)
	if w.hkv != nil {
		*revoke = clientv3.LeaseID(w.hkv.Lease)
	}
	if err != nil {
		return false, true, fmt.Errorf("etcd: %s worker %d/%d: %w", op, k.DatacenterID, k.WorkerID, err)
	}
	return resp.Succeeded, false, nil
}

// Claim implements allocator.LeaseStore.Claim. A worker ID is free without
// a live holder key (etcd decides expiry); the ceiling is bounded by store
// time + ttl + offset. Conflicts retry until ctx ends.
func (s *Store) Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error) {
	if err := req.Validate(); err != nil {
		return allocator.ClaimResult{}, fmt.Errorf("etcd: %w", err)
	}
	if err := s.ensureWorkers(ctx, req.DatacenterID, req.MinWorkerID, req.MaxWorkerID); err != nil {
		return allocator.ClaimResult{}, err
	}
	ttlSec := leaseSeconds(req.TTL)
	// The etcd lease is granted once and revoked unless a claim used it.
	// A lease whose transaction's outcome is unknown is abandoned, not
	// revoked: revoking it could free a worker ID someone issues with.
	var (
		granted   clientv3.LeaseID
		abandoned []clientv3.LeaseID
	)
	used := false
	defer func() {
		if granted != 0 && !used {
			s.revoke(ctx, granted)
		}
		for _, id := range abandoned {
			if id != granted || !used {
				s.revoke(ctx, id)
			}
		}
	}()
	var res allocator.ClaimResult
	err := s.retry(ctx, "claim", func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		capped := req.MaxOwnerLeases > 0 && req.Owner != ""
		p, err := s.readPool(ctx, cli, req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, capped)
		if err != nil {
			return false, err
		}
		if capped {
			now, err := s.storeNow(ctx)
			if err != nil {
				return false, err
			}
			n, err := s.owned(p, req.Owner, req.Holder, now)
			if err != nil {
				return false, err
			}
			if n >= req.MaxOwnerLeases {
				return false, fmt.Errorf("etcd: %s holds %d leases, at most %d: %w", req.Owner, n, req.MaxOwnerLeases, allocator.ErrTooManyLeases)
			}
		}
		type candidate struct {
			row    leaseRecord
			kv     *mvccpb.KeyValue
			holder *mvccpb.KeyValue
		}
		var cands []candidate
		for _, kv := range p.rows {
			var row leaseRecord
			if err := decode(string(kv.Key), kv.Value, &row); err != nil {
				return false, err
			}
			hkv := p.holders[s.keys.holder(row.DatacenterID, row.WorkerID)]
			if hkv != nil {
				var h holderRecord
				if err := decode(string(hkv.Key), hkv.Value, &h); err != nil {
					return false, err
				}
				if h.Holder != req.Holder || row.Holder != req.Holder || row.Owner != req.Owner {
					continue // held by a live lease of another holder
				}
			}
			if req.MaxPrevCeilingMS != 0 && row.CeilingMS > req.MaxPrevCeilingMS {
				continue
			}
			cands = append(cands, candidate{row, kv, hkv})
		}
		if len(cands) == 0 {
			return false, fmt.Errorf("etcd: datacenter %d, workers %d..%d: %w",
				req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, allocator.ErrNoWorkerAvailable)
		}
		c := slices.MinFunc(cands, func(a, b candidate) int {
			return cmp.Or(cmp.Compare(a.row.CeilingMS, b.row.CeilingMS), cmp.Compare(a.row.WorkerID, b.row.WorkerID))
		})
		now, err := s.storeNow(ctx)
		if err != nil {
			return false, err
		}
		if granted == 0 {
			g, err := cli.Grant(ctx, ttlSec)
			if err != nil {
				return false, fmt.Errorf("etcd: grant a lease of %ds: %w", ttlSec, err)
			}
			granted = g.ID
			if s.grantedHook != nil {
				s.grantedHook(granted)
			}
		}
		prev := c.row
		row := prev
		row.Holder, row.Owner, row.SecretHash = req.Holder, req.Owner, req.SecretHash
		row.FencingVersion = prev.FencingVersion + 1
		row.AcquiredAt, row.HeartbeatAt, row.ExpiresAt, row.ReleasedAt = now, now, now.Add(req.TTL), time.Time{}
		row.FloorMS = prev.CeilingMS + 1
		row.CeilingMS = boundedCeiling(prev.CeilingMS, req.CeilingMS, now, req.TTL, req.MaxClockOffset)
		key := allocator.LeaseKey{DatacenterID: row.DatacenterID, WorkerID: row.WorkerID}
		kind, detail := allocator.ClaimEvent(prev.Holder, req.Holder, prev.FencingVersion, prev.CeilingMS)
		seqCmp, evOps, err := s.nextEvent(p.seq, eventRecord{
			DatacenterID: key.DatacenterID, WorkerID: key.WorkerID, Holder: req.Holder,
			FencingVersion: row.FencingVersion, Event: kind, At: now, Detail: detail,
			Owner: req.Owner, RequestID: req.RequestID,
		})
		if err != nil {
			return false, err
		}
		resp, err := workerTxn{
			key: key, rowRev: c.kv.ModRevision, holderRev: modRev(c.holder), row: row,
			holder: &holderRecord{Holder: req.Holder, FencingVersion: row.FencingVersion, LeaseTTL: ttlSec}, lease: granted,
			seqCmp: seqCmp, evOps: evOps,
		}.commit(ctx, cli, s.keys)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			// Retries outlasted the granted etcd lease: grant another.
			granted = 0
			return false, nil
		}
		if err != nil {
			// Outcome unknown: a retry finds this claim's holder key, or not.
			abandoned, granted = append(abandoned, granted), 0
			return false, fmt.Errorf("etcd: claim worker %d/%d: %w", key.DatacenterID, key.WorkerID, err)
		}
		if !resp.Succeeded {
			return false, nil
		}
		used = true
		if c.holder != nil && clientv3.LeaseID(c.holder.Lease) != granted &&
			!slices.Contains(abandoned, clientv3.LeaseID(c.holder.Lease)) {
			// Reclaimed by its holder: the earlier etcd lease holds nothing.
			s.revoke(ctx, clientv3.LeaseID(c.holder.Lease))
		}
		res = allocator.ClaimResult{Lease: row.lease(), PrevHolder: prev.Holder, PrevCeilingMS: prev.CeilingMS, DBNow: now}
		return true, nil
	})
	if err != nil {
		return allocator.ClaimResult{}, err
	}
	return res, nil
}

// revoke revokes an unused etcd lease, ignoring errors (it expires anyway).
func (s *Store) revoke(ctx context.Context, id clientv3.LeaseID) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, _ = s.cli.Revoke(rctx, id)
}

// ensureWorkers creates any missing worker record of the pool, each only if
// its key was never created, so concurrent calls never overwrite one.
func (s *Store) ensureWorkers(ctx context.Context, dc, minID, maxID int64) error {
	from, to := s.keys.worker(dc, minID), s.keys.worker(dc, maxID+1)
	err := s.retry(ctx, "create worker IDs", func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		resp, err := cli.Get(ctx, from, clientv3.WithRange(to), clientv3.WithCountOnly())
		if err != nil {
			return false, err
		}
		if resp.Count == maxID-minID+1 {
			return true, nil
		}
		resp, err = cli.Get(ctx, from, clientv3.WithRange(to), clientv3.WithKeysOnly())
		if err != nil {
			return false, err
		}
		have := make(map[string]bool, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			have[string(kv.Key)] = true
		}
		// New records start at the last restore fence's ceiling (a missing
		// record may have been used before); the fence is compared on write.
		fence, fkv, err := s.readFence(ctx, cli)
		if err != nil {
			return false, err
		}
		fenceCmp := clientv3.Compare(clientv3.ModRevision(s.keys.fence()), "=", fkv.ModRevision)
		cmps := []clientv3.Cmp{fenceCmp}
		var ops []clientv3.Op
		for w := minID; w <= maxID+1; w++ {
			if len(ops) == createBatch || (w > maxID && len(ops) > 0) {
				txn, err := cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
				if err != nil {
					return false, err
				}
				if !txn.Succeeded {
					return false, nil // created concurrently: read again
				}
				cmps, ops = append(cmps[:0], fenceCmp), ops[:0]
			}
			if w > maxID {
				break
			}
			key := s.keys.worker(dc, w)
			if have[key] {
				continue
			}
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
			ops = append(ops, clientv3.OpPut(key, encode(leaseRecord{DatacenterID: dc, WorkerID: w, CeilingMS: fence.CeilingMS})))
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("etcd: create worker IDs %d/%d..%d: %w", dc, minID, maxID, err)
	}
	return nil
}

// worker is a worker record and its holder key, read with the event sequence.
type worker struct {
	row    leaseRecord
	kv     *mvccpb.KeyValue // nil: no record
	holder holderRecord
	hkv    *mvccpb.KeyValue // nil: no live holder key
	seq    *mvccpb.KeyValue
}

// readWorker reads key's record, holder key and event sequence at once.
func (s *Store) readWorker(ctx context.Context, cli *clientv3.Client, key allocator.LeaseKey) (worker, error) {
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpGet(s.keys.worker(key.DatacenterID, key.WorkerID)),
		clientv3.OpGet(s.keys.holder(key.DatacenterID, key.WorkerID)),
		clientv3.OpGet(s.keys.eventSeq()),
	).Commit()
	if err != nil {
		return worker{}, fmt.Errorf("etcd: read worker %d/%d: %w", key.DatacenterID, key.WorkerID, err)
	}
	var w worker
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		w.kv = kvs[0]
		if err := decode(string(w.kv.Key), w.kv.Value, &w.row); err != nil {
			return worker{}, err
		}
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		w.hkv = kvs[0]
		if err := decode(string(w.hkv.Key), w.hkv.Value, &w.holder); err != nil {
			return worker{}, err
		}
	}
	if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) == 1 {
		w.seq = kvs[0]
	}
	return w, nil
}

// check returns nil when w's record and live holder key name holder at
// version, owner and secret match and the expiry is after now; else lost's
// error, also wrapping allocator.ErrLeaseSecret when only owner or secret
// differ. The record's expiry counts: etcd's lease may outlive the ttl.
func (w worker) check(holder string, version int64, owner, secret string, now time.Time, lost func(string) error) error {
	switch {
	case w.kv == nil || w.hkv == nil || w.row.Holder != holder || w.row.FencingVersion != version ||
		w.holder.Holder != holder || w.holder.FencingVersion != version:
		return lost("not held")
	case !now.Before(w.row.ExpiresAt):
		return lost("expired at " + w.row.ExpiresAt.Format(time.RFC3339Nano))
	case w.row.Owner != owner || w.row.SecretHash != secret:
		return fmt.Errorf("%w (%w)", lost("held with another owner or secret"), allocator.ErrLeaseSecret)
	}
	return nil
}

// Heartbeat implements allocator.LeaseStore.Heartbeat: it renews (or, for
// a new ttl, replaces) the etcd lease, then updates the record compared.
func (s *Store) Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error) {
	if err := req.Validate(); err != nil {
		return allocator.Lease{}, time.Time{}, fmt.Errorf("etcd: %w", err)
	}
	k := req.Key
	lost := func(why string) error {
		return fmt.Errorf("etcd: heartbeat of worker %d/%d by %q at version %d: %s: %w",
			k.DatacenterID, k.WorkerID, req.Holder, req.FencingVersion, why, allocator.ErrLeaseLost)
	}
	ttlSec := leaseSeconds(req.TTL)
	var fresh clientv3.LeaseID // granted when the ttl changes; revoked unless used
	used := false
	defer func() {
		if fresh != 0 && !used {
			s.revoke(ctx, fresh)
		}
	}()
	var (
		out allocator.Lease
		at  time.Time
	)
	err := s.retry(ctx, "heartbeat", func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		w, err := s.readWorker(ctx, cli, k)
		if err != nil {
			return false, err
		}
		now, err := s.storeNow(ctx)
		if err != nil {
			return false, err
		}
		if err := w.check(req.Holder, req.FencingVersion, req.Owner, req.SecretHash, now, lost); err != nil {
			return false, err
		}
		lease := clientv3.LeaseID(w.hkv.Lease)
		move := ttlSec != w.holder.LeaseTTL
		if move {
			if fresh == 0 {
				g, err := cli.Grant(ctx, ttlSec)
				if err != nil {
					return false, fmt.Errorf("etcd: grant a lease of %ds: %w", ttlSec, err)
				}
				fresh = g.ID
			}
		} else if _, err := cli.KeepAliveOnce(ctx, lease); err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return false, lost("etcd lease expired")
			}
			return false, fmt.Errorf("etcd: renew the lease of worker %d/%d: %w", k.DatacenterID, k.WorkerID, err)
		}
		row := w.row
		row.HeartbeatAt = maxTime(now, w.row.HeartbeatAt)
		row.ExpiresAt = row.HeartbeatAt.Add(req.TTL)
		row.CeilingMS = boundedCeiling(w.row.CeilingMS, req.CeilingMS, now, req.TTL, req.MaxClockOffset)
		rowKey, holderKey := s.keys.worker(k.DatacenterID, k.WorkerID), s.keys.holder(k.DatacenterID, k.WorkerID)
		ops := []clientv3.Op{clientv3.OpPut(rowKey, encode(row))}
		if move {
			h := w.holder
			h.LeaseTTL = ttlSec
			ops = append(ops, clientv3.OpPut(holderKey, encode(h), clientv3.WithLease(fresh)))
		}
		resp, err := cli.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(rowKey), "=", w.kv.ModRevision),
			clientv3.Compare(clientv3.ModRevision(holderKey), "=", w.hkv.ModRevision),
		).Then(ops...).Commit()
		if err != nil {
			return false, fmt.Errorf("etcd: heartbeat of worker %d/%d: %w", k.DatacenterID, k.WorkerID, err)
		}
		if !resp.Succeeded {
			return false, nil
		}
		if move {
			s.revoke(ctx, lease)
		}
		// The holder key is on fresh: moved now or by an uncertain try.
		used = move || (fresh != 0 && lease == fresh)
		out, at = row.lease(), row.HeartbeatAt
		return true, nil
	})
	if err != nil {
		return allocator.Lease{}, time.Time{}, err
	}
	return out, at, nil
}

// Release implements allocator.LeaseStore.Release: while the lease is held
// (as Heartbeat checks), it deletes the holder key, revokes its etcd lease
// and sets allocator.ReleaseCeiling, never raising the ceiling.
func (s *Store) Release(ctx context.Context, req allocator.ReleaseRequest) (int64, error) {
	if err := req.Validate(); err != nil {
		return 0, fmt.Errorf("etcd: %w", err)
	}
	k := req.Key
	var (
		revoked clientv3.LeaseID
		unknown bool // a try's transaction may have committed unseen
		ceiling int64
	)
	err := s.retry(ctx, "release", func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		w, err := s.readWorker(ctx, cli, k)
		if err != nil {
			return false, err
		}
		if unknown && w.kv != nil && w.row.Holder == "" && w.row.FencingVersion == req.FencingVersion && !w.row.ReleasedAt.IsZero() {
			// Released at this version: the uncertain try committed.
			ceiling = w.row.CeilingMS
			return true, nil
		}
		lost := func(why string) error {
			return fmt.Errorf("etcd: release of worker %d/%d by %q at version %d: %s: %w",
				k.DatacenterID, k.WorkerID, req.Holder, req.FencingVersion, why, allocator.ErrLeaseLost)
		}
		now, err := s.storeNow(ctx)
		if err != nil {
			return false, err
		}
		// An expired lease is held no longer, taken over or not.
		if err := w.check(req.Holder, req.FencingVersion, req.Owner, req.SecretHash, now, lost); err != nil {
			return false, err
		}
		left, err := allocator.ReleaseCeiling(w.row.FloorMS, w.row.CeilingMS, req.LastTimestampMS)
		if err != nil {
			return false, fmt.Errorf("etcd: release of worker %d/%d by %q at version %d: %w",
				k.DatacenterID, k.WorkerID, req.Holder, req.FencingVersion, err)
		}
		row := w.row
		row.Holder, row.Owner, row.SecretHash = "", "", ""
		row.ReleasedAt = maxTime(now, w.row.HeartbeatAt)
		row.ExpiresAt = row.ReleasedAt
		row.CeilingMS = left
		committed, uncertain, err := s.freeWorker(ctx, cli, "release", k, w, row, eventRecord{
			DatacenterID: k.DatacenterID, WorkerID: k.WorkerID, Holder: req.Holder, FencingVersion: req.FencingVersion,
			Event: allocator.EventRelease, At: now, Detail: fmt.Sprintf("ceiling set to %d", row.CeilingMS),
			Owner: req.Owner, RequestID: req.RequestID,
		}, &revoked)
		if uncertain {
			unknown = true
		}
		if committed {
			ceiling = left
		}
		return committed, err
	})
	if err == nil && revoked != 0 {
		s.revoke(ctx, revoked)
	}
	if err != nil {
		return 0, err
	}
	return ceiling, nil
}

// RecordLeaseEvent implements allocator.LeaseStore.RecordLeaseEvent. Every
// append compares and advances a sequence key, so IDs are dense and in
// commit order.
func (s *Store) RecordLeaseEvent(ctx context.Context, ev allocator.LeaseEvent) error {
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	return s.retry(ctx, "record lease event", func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		resp, err := cli.Get(ctx, s.keys.eventSeq())
		if err != nil {
			return false, fmt.Errorf("etcd: record %s event: %w", ev.Kind, err)
		}
		var seq *mvccpb.KeyValue
		if len(resp.Kvs) == 1 {
			seq = resp.Kvs[0]
		}
		now, err := s.storeNow(ctx)
		if err != nil {
			return false, err
		}
		seqCmp, ops, err := s.nextEvent(seq, eventRecord{
			DatacenterID: ev.DatacenterID, WorkerID: ev.WorkerID, Holder: ev.Holder,
			FencingVersion: ev.FencingVersion, Event: ev.Kind, At: now, Detail: ev.Detail,
			Owner: ev.Owner, RequestID: ev.RequestID,
		})
		if err != nil {
			return false, err
		}
		txn, err := cli.Txn(ctx).If(seqCmp).Then(ops...).Commit()
		if err != nil {
			return false, fmt.Errorf("etcd: record %s event of worker %d/%d: %w", ev.Kind, ev.DatacenterID, ev.WorkerID, err)
		}
		return txn.Succeeded, nil
	})
}

// ListLeases implements allocator.LeaseAdmin.ListLeases, in key order.
func (s *Store) ListLeases(ctx context.Context) ([]allocator.Lease, error) {
	return listRecords(ctx, s.cli, s.keys.leases(), "leases", func(row leaseRecord) (allocator.Lease, bool) {
		return row.lease(), true
	})
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
