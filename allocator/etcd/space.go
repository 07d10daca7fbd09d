package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idgen-project/idgen/allocator"
)

var _ allocator.SpaceReporter = (*Store)(nil)

// Space and history on etcd.
//
// etcd keeps every revision of every key until the history is compacted.
// idgen writes a revision of a namespace's record for every segment fetch
// (every request of a strict namespace) and of a worker's record for every
// heartbeat, and never reads an old one. Without compaction the backend
// grows until it passes --quota-backend-bytes: etcd then raises the
// NOSPACE alarm and refuses every write (rpctypes.ErrNoSpace) until an
// operator compacts, defragments and disarms it. Compaction is
// cluster-wide: it drops the old revisions of every user's keys, so the
// node compacts (CompactHistory) only as its settings say
// (docs/operations.md).

// noSpace wraps err with allocator.ErrStoreFull when etcd refused a write
// for want of space (the NOSPACE alarm), so that the keeper, the segment
// allocator and the core can name the cause; other errors come back as
// they are.
func noSpace(err error) error {
	if err == nil || errors.Is(err, allocator.ErrStoreFull) || !errors.Is(err, rpctypes.ErrNoSpace) {
		return err
	}
	return fmt.Errorf("%w (etcd NOSPACE alarm): %w", allocator.ErrStoreFull, err)
}

// Space implements allocator.SpaceReporter: the backend of the largest
// member (the first to reach the quota), the quota as the members report
// it (etcd 3.6 and later; 0 from older members), the cluster's alarms and
// its current revision. A member that does not answer is skipped; Space
// fails only when none does, or the alarms cannot be read.
func (s *Store) Space(ctx context.Context) (allocator.StoreSpace, error) {
	var out allocator.StoreSpace
	list, err := s.cli.MemberList(ctx)
	if err != nil {
		return out, fmt.Errorf("etcd: space of %s: list members: %w", s.dsn, err)
	}
	var endpoints []string
	for _, m := range list.Members {
		if !m.IsLearner && len(m.ClientURLs) > 0 {
			endpoints = append(endpoints, (&memberProbe{url: m.ClientURLs[0]}).endpoint())
		}
	}
	answered, errs := s.readStatus(ctx, endpoints, &out)
	if answered == 0 {
		// The members' advertised URLs may not be reachable from here (a
		// proxy, another network): the DSN's endpoints are.
		var more []error
		answered, more = s.readStatus(ctx, s.cli.Endpoints(), &out)
		errs = append(errs, more...)
	}
	if answered == 0 {
		return out, fmt.Errorf("etcd: space of %s: no member answered: %w", s.dsn, errors.Join(errs...))
	}
	alarms, err := s.cli.AlarmList(ctx)
	if err != nil {
		return out, fmt.Errorf("etcd: alarms of %s: %w", s.dsn, err)
	}
	out.Alarms = alarmNames(alarms.Alarms)
	return out, nil
}

// statusTimeout bounds the status read of one member, so that a member
// that does not answer leaves time for the others.
const statusTimeout = 2 * time.Second

// readStatus reads the status of each endpoint into out (the largest
// backend, the quota, the revision) and returns how many answered and
// why the others did not.
func (s *Store) readStatus(ctx context.Context, endpoints []string, out *allocator.StoreSpace) (int, []error) {
	var errs []error
	answered := 0
	for _, ep := range endpoints {
		sctx, cancel := context.WithTimeout(ctx, statusTimeout)
		st, err := s.cli.Status(sctx, ep)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("member %s: %w", ep, err))
			continue
		}
		answered++
		if st.DbSize > out.Size {
			out.Size, out.InUse = st.DbSize, st.DbSizeInUse
		}
		out.Quota = max(out.Quota, st.DbSizeQuota)
		if st.Header != nil {
			out.Revision = max(out.Revision, st.Header.Revision)
		}
	}
	return answered, errs
}

// alarmNames returns the distinct names of the raised alarms, in the order
// etcd lists them: "NOSPACE", "CORRUPT".
func alarmNames(alarms []*etcdserverpb.AlarmMember) []string {
	var out []string
	for _, a := range alarms {
		if a.Alarm == etcdserverpb.AlarmType_NONE {
			continue
		}
		name := a.Alarm.String()
		dup := false
		for _, n := range out {
			dup = dup || n == name
		}
		if !dup {
			out = append(out, name)
		}
	}
	return out
}

// Revision returns the cluster's current revision, as a linearizable read
// sees it.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	resp, err := s.cli.Get(ctx, s.keys.layout(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcd: revision of %s: %w", s.dsn, err)
	}
	return resp.Header.Revision, nil
}

// CompactHistory compacts the cluster's history up to rev: etcd drops every
// revision of every key below it, except each key's latest. It returns
// once etcd has accepted the compaction (the pages it frees are reused by
// later writes; only a defragmentation gives them back to the file
// system). A revision compacted already, by this node, another node or
// etcd's own --auto-compaction, is no error.
func (s *Store) CompactHistory(ctx context.Context, rev int64) error {
	if rev <= 0 {
		return nil
	}
	if _, err := s.cli.Compact(ctx, rev); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("etcd: compact %s up to revision %d: %w", s.dsn, rev, err)
	}
	return nil
}

// HistoryCompacted reports whether the cluster's history was ever
// compacted (revision 1 is gone): by idgen, by an operator, or by etcd's
// own --auto-compaction-*. The flags themselves cannot be read by a
// client; a cluster started with them but younger than their retention
// has not compacted yet.
func (s *Store) HistoryCompacted(ctx context.Context) (bool, error) {
	_, err := s.cli.Get(ctx, s.keys.layout(), clientv3.WithRev(1), clientv3.WithCountOnly())
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, rpctypes.ErrCompacted):
		return true, nil
	}
	return false, fmt.Errorf("etcd: read revision 1 of %s: %w", s.dsn, err)
}

// KeysOutsidePrefix counts the keys of the cluster outside the store's key
// prefix: zero when idgen is the cluster's only user that holds keys. A
// client whose role may read only the prefix gets an error (permission
// denied): the cluster is then taken as shared.
func (s *Store) KeysOutsidePrefix(ctx context.Context) (int64, error) {
	prefix := string(s.keys)
	before, err := s.cli.Get(ctx, "\x00", clientv3.WithRange(prefix), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcd: count the keys outside %s: %w", prefix, err)
	}
	after, err := s.cli.Get(ctx, rangeEnd(prefix), clientv3.WithFromKey(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcd: count the keys outside %s: %w", prefix, err)
	}
	return before.Count + after.Count, nil
}

// Prefix returns the store's key prefix, "/idgen/" by default.
func (s *Store) Prefix() string { return string(s.keys) }
