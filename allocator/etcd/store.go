// Package etcd is idgen's Store on etcd v3, through go.etcd.io/etcd/client/v3:
// the Raft-backed option for teams that already run etcd.
//
// Open connects with a DSN naming the members and a key prefix:
//
//	etcd://[user:password@]host1:2379,host2:2379,host3:2379/prefix[?params]
//	etcds://…                       TLS, verified against the system's CAs
//	?ca_file=ca.pem                 TLS, verified against these CAs
//	&cert_file=c.pem&key_file=k.pem client certificate
//	&server_name=etcd.internal      name the members' certificates carry
//	&dial_timeout=5s                how long Open waits for a connection
//	&time_urls=http://h:2381/version,…  where member time is read (below)
//
// The password is never printed: errors and logs show the DSN redacted.
//
// # Keys
//
// Everything lives under the prefix (default /idgen/), as JSON a person can
// read with etcdctl:
//
//	<prefix>layout                     the Snowflake layout, written once
//	<prefix>leases/<dc>/<worker>       one record per worker ID (the worker_leases row):
//	                                   holder, owner, fencing version, times,
//	                                   ts_floor_ms, ts_ceiling_ms;
//	                                   no etcd lease: it outlives every holder
//	<prefix>holders/<dc>/<worker>      {holder, fencing_version}, attached to the
//	                                   holder's etcd lease: it exists while the lease lives
//	<prefix>events/<id>                lease events, id zero-padded to 20 digits
//	<prefix>meta/event-seq             the last event id
//	<prefix>segments/<namespace>       one record per namespace (the segments row);
//	                                   deleted_at marks a deleted one, which stays
//	<prefix>meta/fence                 {store_id, generation, ceiling_ms, …}: the store's
//	                                   identity and its restore fences (fence.go)
//	<prefix>meta/goose/<version>       applied "migrations" (see Store.Migrations)
//	<prefix>meta/durability-probe      written by CheckDurability
//
// Worker and datacenter IDs are zero-padded to 10 digits so keys sort
// numerically.
//
// A claim is one transaction comparing the mod revisions of the worker
// record, its holder key and the event sequence; it bumps the fencing
// version, never lowers the ceiling, puts the holder key on a fresh etcd
// lease and appends the event. etcd alone decides expiry: the holder key
// goes when its lease does. Store time is the members' wall clocks, read
// over HTTP and agreed by a majority (docs/architecture.md). Operations run
// in bounded tries on one member each (see retry). A segment fetch writes
// the namespace record back with max_id advanced, comparing its mod
// revision, and retries on a conflict.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/dburl"
)

var (
	_ allocator.Store        = (*Store)(nil)
	_ allocator.RetryCounter = (*Store)(nil)
)

// Store is idgen's Store on etcd. It is safe for concurrent use.
type Store struct {
	cli *clientv3.Client // balances requests over the members
	// members gives retried operations one member's client per try; nil
	// in tests that build a Store by hand.
	members *memberSet
	dsn     string // redacted, for error messages
	keys    keyspace
	time    *timeSource
	// now is the node's wall clock (a seam for tests).
	now func() time.Time
	// grantedHook sees every etcd lease a claim grants (a seam for tests).
	grantedHook func(clientv3.LeaseID)
	closeIdle   func() // closes the idle HTTP connections of the time source
	// http reads the members' /version and /metrics with the DSN's TLS.
	http *http.Client

	lastNow    atomic.Int64 // the latest store time returned, Unix ns: store time never goes back
	conflicts  atomic.Int64 // transactions run again after a compare failed
	transients atomic.Int64 // tries run again after a transient error or no answer (see retry)

	// fetches holds a *fetchState per namespace, so one store's fetches of
	// a namespace go one at a time instead of failing each other's compares.
	fetches sync.Map

	seqs sequenceState // sequence.go
}

// Open connects to the cluster dsn names and checks a linearizable read.
// Errors show the DSN without its password.
func Open(ctx context.Context, dsn string) (*Store, error) {
	if err := dburl.Check(dsn); err != nil {
		return nil, fmt.Errorf("etcd: invalid DSN (not shown): %w", err)
	}
	safe := redact(dsn)
	cfg, err := parseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("etcd: invalid DSN %s: %w", safe, err)
	}
	base := clientv3.Config{
		Endpoints:   cfg.endpoints,
		TLS:         cfg.tls,
		Username:    cfg.username,
		Password:    cfg.password,
		DialTimeout: cfg.dialTimeout,
		// A stalled member leaves the rotation after 6+2 s; etcd refuses
		// pings more often than every 5 s.
		DialKeepAliveTime:    6 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Context:              context.WithoutCancel(ctx),
		Logger:               zap.NewNop(),
	}
	cli, err := clientv3.New(base)
	if err != nil {
		return nil, fmt.Errorf("etcd: connect to %s: %w", safe, err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = cfg.tls
	hc := &http.Client{Transport: transport, Timeout: timeReadTimeout}
	s := &Store{
		cli:       cli,
		dsn:       safe,
		keys:      keyspace(cfg.prefix),
		time:      newTimeSource(cfg.timeURLs, hc),
		http:      hc,
		closeIdle: transport.CloseIdleConnections,
		now:       time.Now,
	}
	if err := s.Ping(ctx); err != nil {
		_ = cli.Close()
		return nil, err
	}
	s.members = newMemberSet(base, cli)
	return s, nil
}

// Close closes the store's connections to etcd.
func (s *Store) Close() error {
	if s.members != nil {
		s.members.close()
	}
	if s.time != nil {
		s.time.close()
	}
	if s.closeIdle != nil {
		s.closeIdle()
	}
	if err := s.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("etcd: close %s: %w", s.dsn, err)
	}
	return nil
}

// Ping checks that a quorum of the cluster answers a linearizable read.
func (s *Store) Ping(ctx context.Context) error {
	if _, err := s.cli.Get(ctx, s.keys.layout(), clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("etcd: ping %s: %w", s.dsn, err)
	}
	return nil
}

// SerializationRetries implements allocator.RetryCounter: transactions run
// again because a compare found a key changed by another writer.
func (s *Store) SerializationRetries() int64 { return s.conflicts.Load() }

// storeNow returns store time (clock.go): the node's clock clamped into the
// members' agreed window, never before a time already returned; an error
// wrapping ErrNoStoreTime when the members cannot be read or disagree.
func (s *Store) storeNow(ctx context.Context) (time.Time, error) {
	lo, hi, err := s.time.window(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("etcd: %s: %w", s.dsn, err)
	}
	return s.advance(clamp(s.now(), lo, hi)), nil
}

// advance returns the later of t and the latest store time, and records it.
func (s *Store) advance(t time.Time) time.Time {
	t = t.UTC().Truncate(time.Microsecond)
	for {
		last := s.lastNow.Load()
		if t.UnixNano() <= last {
			return time.Unix(0, last).UTC()
		}
		if s.lastNow.CompareAndSwap(last, t.UnixNano()) {
			return t
		}
	}
}

// boundedCeiling is the ceiling a claim or heartbeat writes: the proposed
// one, at most store time + ttl + offset, and never below the stored one.
func boundedCeiling(stored, proposed int64, now time.Time, ttl, offset time.Duration) int64 {
	return max(stored, min(proposed, now.Add(ttl+offset).UnixMilli()))
}
