package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idgen-project/idgen/allocator"
)

// checkNamespace reports a namespace record the SQL stores' constraints
// would refuse (allocator.NamespaceAdmin), wrapping
// allocator.ErrInvalidNamespace.
func checkNamespace(r namespaceRecord) error {
	var problem string
	switch {
	case r.Namespace == "" || len(r.Namespace) > allocator.MaxNameLen:
		problem = fmt.Sprintf("name must have 1 to %d bytes", allocator.MaxNameLen)
	case r.MaxID < 0:
		problem = fmt.Sprintf("negative max_id %d", r.MaxID)
	case !(1 <= r.MinStep && r.MinStep <= r.Step && r.Step <= r.MaxStep):
		problem = fmt.Sprintf("steps must satisfy 1 <= min_step (%d) <= step (%d) <= max_step (%d)", r.MinStep, r.Step, r.MaxStep)
	case !r.Mode.Valid():
		problem = fmt.Sprintf("unknown mode %q", r.Mode)
	case !r.Fallback.Valid():
		problem = fmt.Sprintf("unknown fallback %q", r.Fallback)
	case r.MaxIDLimit > 0 && r.MaxID > r.MaxIDLimit:
		problem = fmt.Sprintf("max_id %d above max_id_limit %d", r.MaxID, r.MaxIDLimit)
	case r.Fallback == allocator.FallbackSnowflake && r.MaxIDLimit <= 0:
		problem = "the snowflake fallback needs a max_id_limit"
	case r.Stride < 0 || r.Offset < 0 || r.Offset >= max(r.Stride, 1):
		problem = fmt.Sprintf("stride and offset must satisfy 1 <= stride (%d, 0 for 1) and 0 <= offset (%d) < stride", r.Stride, r.Offset)
	default:
		return nil
	}
	return fmt.Errorf("%w: %s", allocator.ErrInvalidNamespace, problem)
}

// segmentTime is the time stamped on a namespace record: the last agreed
// store time if recent (never waiting on a slow member), else the node's
// clock; never before after. No rule depends on these times.
func (s *Store) segmentTime(after time.Time) time.Time {
	lo, hi, ok := s.time.cachedWindow()
	if !ok {
		// Not fed to advance: an off node clock must not become store time.
		return maxTime(s.now().UTC().Truncate(time.Microsecond), after)
	}
	return maxTime(s.advance(clamp(s.now(), lo, hi)), after)
}

// CreateNamespace implements allocator.NamespaceAdmin.CreateNamespace; a
// max_id_limit of 0 or below means none. A new key is written only if
// never created; a tombstone is revived comparing its mod revision.
func (s *Store) CreateNamespace(ctx context.Context, ns allocator.Namespace) (allocator.Namespace, error) {
	fail := func(err error) (allocator.Namespace, error) {
		return allocator.Namespace{}, fmt.Errorf("etcd: create namespace %q: %w", ns.Name, err)
	}
	rec := recordOf(ns)
	rec.Version = 0 // the store's, whatever ns holds
	if err := checkNamespace(rec); err != nil {
		return fail(err)
	}
	key := s.keys.namespace(ns.Name)
	var out namespaceRecord
	err := s.retry(ctx, "create namespace "+ns.Name, func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		out = rec
		out.CreatedAt = s.segmentTime(time.Time{})
		out.UpdatedAt = out.CreatedAt
		tomb, kv, err := s.readNamespace(ctx, cli, ns.Name)
		if err != nil {
			return false, err
		}
		cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		if kv != nil {
			if tomb.DeletedAt.IsZero() {
				return false, allocator.ErrNamespaceExists
			}
			next, err := tomb.namespace().Revive(ns)
			if err != nil {
				return false, err
			}
			out = recordOf(next)
			out.CreatedAt = s.segmentTime(tomb.UpdatedAt)
			out.UpdatedAt = out.CreatedAt
			if err := checkNamespace(out); err != nil {
				return false, err
			}
			cmp = clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)
		}
		resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, encode(out))).Commit()
		if err != nil {
			return false, err
		}
		return resp.Succeeded, nil
	})
	if err != nil {
		return fail(err)
	}
	return out.namespace(), nil
}

// recordOf returns the record of ns, with no times.
func recordOf(ns allocator.Namespace) namespaceRecord {
	stride, offset := ns.Interleave()
	return namespaceRecord{
		Namespace: ns.Name, MaxID: ns.MaxID, MaxIDLimit: max(ns.MaxIDLimit, 0), Step: ns.Step, MinStep: ns.MinStep, MaxStep: ns.MaxStep,
		Mode: ns.Mode, Fallback: ns.Fallback, Version: ns.Version, Description: ns.Description,
		Stride: stride, Offset: offset,
	}
}

// DeleteNamespace implements allocator.NamespaceAdmin.DeleteNamespace by
// marking the record deleted.
func (s *Store) DeleteNamespace(ctx context.Context, name string) (allocator.Namespace, error) {
	snap, _, err := s.casNamespace(ctx, "delete namespace", name, nil, func(rec *namespaceRecord) (bool, error) {
		rec.DeletedAt = s.segmentTime(rec.UpdatedAt)
		rec.UpdatedAt = rec.DeletedAt
		return true, nil
	})
	if err != nil {
		return allocator.Namespace{}, err
	}
	s.fetches.Delete(name)
	return snap.rec.namespace(), nil
}

// readNamespace returns name's record and key-value, or nil without one.
// The record may be a tombstone, which only CreateNamespace accepts.
func (s *Store) readNamespace(ctx context.Context, cli *clientv3.Client, name string) (namespaceRecord, *mvccpb.KeyValue, error) {
	key := s.keys.namespace(name)
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return namespaceRecord{}, nil, fmt.Errorf("etcd: read namespace %q: %w", name, err)
	}
	if len(resp.Kvs) == 0 || name == "" {
		return namespaceRecord{}, nil, nil
	}
	var rec namespaceRecord
	if err := decode(key, resp.Kvs[0].Value, &rec); err != nil {
		return namespaceRecord{}, nil, err
	}
	return rec, resp.Kvs[0], nil
}

// GetNamespace implements allocator.SegmentStore.GetNamespace.
func (s *Store) GetNamespace(ctx context.Context, name string) (allocator.Namespace, error) {
	var (
		rec namespaceRecord
		kv  *mvccpb.KeyValue
	)
	err := s.retry(ctx, "get namespace", func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		var err error
		rec, kv, err = s.readNamespace(ctx, cli, name)
		return err == nil, err
	})
	if err != nil {
		return allocator.Namespace{}, err
	}
	if kv == nil || !rec.DeletedAt.IsZero() {
		return allocator.Namespace{}, fmt.Errorf("etcd: get namespace %q: %w", name, allocator.ErrNamespaceNotFound)
	}
	return rec.namespace(), nil
}

// ListNamespaces implements allocator.NamespaceAdmin.ListNamespaces, in
// byte order of the names.
func (s *Store) ListNamespaces(ctx context.Context) ([]allocator.Namespace, error) {
	return listRecords(ctx, s.cli, s.keys.segments(), "namespaces", func(rec namespaceRecord) (allocator.Namespace, bool) {
		return rec.namespace(), rec.DeletedAt.IsZero()
	})
}

// nsSnapshot is a namespace record as of a mod revision.
type nsSnapshot struct {
	rec namespaceRecord
	rev int64
}

// casFastRetries is how many conflicts in a row casNamespace retries
// within one try before handing over to retry.
const casFastRetries = 2

// casNamespace reads name's record (or starts from cached, possibly stale),
// lets change compute the new one and writes it comparing the mod revision.
// On a failed compare it continues from the record the transaction
// returned, never rereading: a stale cache is replaced at once, and after
// casFastRetries real conflicts the try ends. A refusal judged on a
// possibly stale snapshot is judged again on the current record. It
// returns the record after the change and whether it wrote; not found
// wraps allocator.ErrNamespaceNotFound.
func (s *Store) casNamespace(ctx context.Context, op, name string, cached *nsSnapshot,
	change func(rec *namespaceRecord) (write bool, err error),
) (nsSnapshot, bool, error) {
	var (
		out   nsSnapshot
		wrote bool
	)
	key := s.keys.namespace(name)
	snap := cached
	carried := false // snap is what a failed compare returned before a backoff
	err := s.retry(ctx, op+" "+name, func(ctx context.Context, cli *clientv3.Client) (bool, error) {
		conflicts := 0
		// Judge a refusal on a possibly stale snapshot again.
		judgeAgain := snap != nil && (snap == cached || carried)
		carried = false
		for fromCache := snap == cached && snap != nil; ; fromCache, judgeAgain = false, false {
			if snap == nil {
				rec, kv, err := s.readNamespace(ctx, cli, name)
				if err != nil {
					return false, err
				}
				if kv == nil || !rec.DeletedAt.IsZero() {
					return false, fmt.Errorf("etcd: %s %q: %w", op, name, allocator.ErrNamespaceNotFound)
				}
				snap = &nsSnapshot{rec, kv.ModRevision}
			}
			rec := snap.rec
			write, err := change(&rec)
			if (err != nil || !write) && judgeAgain {
				snap = nil
				continue
			}
			if err != nil {
				return false, fmt.Errorf("etcd: %s %q: %w", op, name, err)
			}
			if !write {
				out, wrote = *snap, false
				return true, nil
			}
			resp, err := cli.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(key), "=", snap.rev)).
				Then(clientv3.OpPut(key, encode(rec))).
				Else(clientv3.OpGet(key)).
				Commit()
			if err != nil {
				return false, fmt.Errorf("etcd: %s %q: %w", op, name, err)
			}
			if resp.Succeeded {
				// The put is the only write: its revision is the record's.
				out, wrote = nsSnapshot{rec, resp.Header.Revision}, true
				return true, nil
			}
			snap = nil
			if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 && name != "" {
				var cur namespaceRecord
				if err := decode(key, kvs[0].Value, &cur); err != nil {
					return false, err
				}
				if cur.DeletedAt.IsZero() { // a tombstone is read again: not found
					snap = &nsSnapshot{cur, kvs[0].ModRevision}
				}
			}
			if fromCache {
				continue // the cache was stale: no conflict with a writer
			}
			if conflicts++; conflicts > casFastRetries {
				// End the try; compare against the returned record rather than reread.
				carried = snap != nil
				return false, nil
			}
			s.conflicts.Add(1)
		}
	})
	return out, wrote, err
}

// UpdateNamespace implements allocator.NamespaceAdmin.UpdateNamespace, a
// compare-and-swap retried on conflict; an invalid result wraps
// allocator.ErrInvalidNamespace and changes nothing.
func (s *Store) UpdateNamespace(ctx context.Context, name string, u allocator.NamespaceUpdate) (allocator.Namespace, error) {
	snap, _, err := s.casNamespace(ctx, "update namespace", name, nil, func(rec *namespaceRecord) (bool, error) {
		set(&rec.Step, u.Step)
		set(&rec.MinStep, u.MinStep)
		set(&rec.MaxStep, u.MaxStep)
		set(&rec.Mode, u.Mode)
		set(&rec.Fallback, u.Fallback)
		set(&rec.Description, u.Description)
		if rec.MaxIDLimit <= 0 && u.MaxIDLimit != nil {
			rec.MaxIDLimit = max(*u.MaxIDLimit, 0) // set once, never changed
		}
		if err := checkNamespace(*rec); err != nil {
			return false, err
		}
		rec.UpdatedAt = s.segmentTime(rec.UpdatedAt)
		return true, nil
	})
	if err != nil {
		return allocator.Namespace{}, err
	}
	return snap.rec.namespace(), nil
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// fetchState is what a store keeps per namespace for its fetches.
type fetchState struct {
	// lock is a one-slot semaphore serializing fetches; it guards last.
	lock chan struct{}
	// last is the record as the last fetch left it (nil before), compared
	// against without rereading.
	last *nsSnapshot
}

func (s *Store) fetchStateOf(name string) *fetchState {
	if f, ok := s.fetches.Load(name); ok {
		return f.(*fetchState)
	}
	f, _ := s.fetches.LoadOrStore(name, &fetchState{lock: make(chan struct{}, 1)})
	return f.(*fetchState)
}

// FetchSegment implements allocator.SegmentStore.FetchSegment: a
// transaction comparing the record's mod revision writes max_id advanced
// and version + 1, retried after a backoff on conflict until ctx ends.
// Fetches of one namespace through one Store wait for each other.
func (s *Store) FetchSegment(ctx context.Context, name string, n int64) (allocator.Segment, error) {
	if err := allocator.ValidFetch(name, n); err != nil {
		return allocator.Segment{}, fmt.Errorf("etcd: %w", err)
	}
	f := s.fetchStateOf(name)
	select {
	case f.lock <- struct{}{}:
	case <-ctx.Done():
		return allocator.Segment{}, fmt.Errorf("etcd: fetch segment of %q: %w", name, ctx.Err())
	}
	defer func() { <-f.lock }()
	snap, _, err := s.casNamespace(ctx, "fetch segment of", name, f.last, func(rec *namespaceRecord) (bool, error) {
		if ns := rec.namespace(); ns.Remaining() < n {
			return false, ns.ExhaustedError(n)
		}
		rec.MaxID += n
		rec.Version++
		rec.UpdatedAt = s.segmentTime(rec.UpdatedAt)
		return true, nil
	})
	if err != nil {
		f.last = nil
		if isNotFound(err) {
			s.fetches.Delete(name) // keep no state for names that do not exist
		}
		return allocator.Segment{}, err
	}
	f.last = &snap
	rec := snap.rec
	return allocator.Segment{Namespace: rec.namespace(), First: rec.MaxID - n + 1, Last: rec.MaxID}, nil
}

// ReturnTail implements allocator.SegmentStore.ReturnTail, comparing max_id
// and version, and the record's mod revision in the transaction.
func (s *Store) ReturnTail(ctx context.Context, name string, expectMaxID, expectVersion, newMaxID int64) (bool, error) {
	if err := allocator.ValidReturnTail(name, expectMaxID, newMaxID); err != nil {
		return false, fmt.Errorf("etcd: %w", err)
	}
	_, wrote, err := s.casNamespace(ctx, "return tail of", name, nil, func(rec *namespaceRecord) (bool, error) {
		if rec.MaxID != expectMaxID || rec.Version != expectVersion {
			return false, nil
		}
		rec.MaxID = newMaxID
		rec.Version++
		rec.UpdatedAt = s.segmentTime(rec.UpdatedAt)
		return true, checkNamespace(*rec)
	})
	if err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return wrote, nil
}

func isNotFound(err error) bool { return errors.Is(err, allocator.ErrNamespaceNotFound) }
