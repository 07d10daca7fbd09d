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

// Space and history on etcd. Without compaction etcd's backend passes
// --quota-backend-bytes and NOSPACE refuses every write; compaction is
// cluster-wide, so the node compacts only as its settings say.

// noSpace wraps err with allocator.ErrStoreFull when etcd refused a write
// for the NOSPACE alarm; other errors are returned as they are.
func noSpace(err error) error {
	if err == nil || errors.Is(err, allocator.ErrStoreFull) || !errors.Is(err, rpctypes.ErrNoSpace) {
		return err
	}
	return fmt.Errorf("%w (etcd NOSPACE alarm): %w", allocator.ErrStoreFull, err)
}

// Space implements allocator.SpaceReporter: the largest member's backend,
// the quota (0 before etcd 3.6), the alarms and the revision. It fails only
// when no member answers or the alarms cannot be read.
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
		// Advertised URLs may be unreachable from here; the DSN's are not.
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

// statusTimeout bounds one member's status read.
const statusTimeout = 2 * time.Second

// readStatus reads each endpoint's status into out and returns how many
// answered and why the others did not.
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

// alarmNames returns the distinct raised alarms in etcd's order.
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

// Revision returns the cluster's current revision (linearizable).
func (s *Store) Revision(ctx context.Context) (int64, error) {
	resp, err := s.cli.Get(ctx, s.keys.layout(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcd: revision of %s: %w", s.dsn, err)
	}
	return resp.Header.Revision, nil
}

// CompactHistory compacts the cluster's history up to rev. A revision
// already compacted, by anyone, is no error.
func (s *Store) CompactHistory(ctx context.Context, rev int64) error {
	if rev <= 0 {
		return nil
	}
	if _, err := s.cli.Compact(ctx, rev); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("etcd: compact %s up to revision %d: %w", s.dsn, rev, err)
	}
	return nil
}

// HistoryCompacted reports whether revision 1 is gone, i.e. the history
// was ever compacted (etcd's auto-compaction flags cannot be read).
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

// KeysOutsidePrefix counts the cluster's keys outside the prefix; a role
// that may read only the prefix gets an error (the cluster counts as shared).
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
