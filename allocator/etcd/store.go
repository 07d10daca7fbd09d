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
// Datacenter and worker IDs are zero-padded to 10 digits so that keys sort
// as the numbers do.
//
// # Leases
//
// A claim is one etcd transaction that compares the mod revisions of the
// worker's record, of its holder key (absent, or held by the claimer itself)
// and of the event sequence it read, and then writes the record with the
// fencing version incremented and the ceiling never lowered, puts the
// holder key on a fresh etcd lease of ttl (rounded up to whole seconds), and
// appends the event. Whether a lease has expired is decided by etcd alone:
// the holder key is gone once etcd's lease has expired. A heartbeat renews
// the etcd lease (or moves the holder key to a new one when the ttl
// changes) and updates the record in a transaction fenced the same way; a
// release deletes the holder key, and so does an eviction, which also moves
// the fencing version on.
//
// Store time, which etcd does not have, is the members' wall clocks read
// over HTTP and agreed by a majority; see docs/architecture.md.
//
// Every operation the keeper and the segment allocator depend on runs in
// tries, each bounded in time and made on one member's client; a member
// that does not answer or has no leader is left for the next (see retry).
//
// # Segments
//
// A fetch reads the namespace record and writes it back with max_id
// advanced, in a transaction that compares the record's mod revision; on a
// conflict it reads again and retries after a backoff. A range is handed
// out only when its transaction succeeded.
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
	// members gives the retried operations one member's client per try;
	// nil in tests that build a Store by hand.
	members *memberSet
	dsn     string // redacted, for error messages
	keys    keyspace
	time    *timeSource
	// now is the node's wall clock, which store time clamps into the
	// members' window; a seam for tests.
	now func() time.Time
	// grantedHook, when set, sees every etcd lease a claim grants before
	// the claim's transaction uses it; a seam for tests.
	grantedHook func(clientv3.LeaseID)
	closeIdle   func() // closes the idle HTTP connections of the time source
	// http reads the members' HTTP endpoints (/version for time, /metrics
	// for the durability check), with the DSN's TLS settings.
	http *http.Client

	lastNow    atomic.Int64 // the latest store time returned, Unix ns: store time never goes back
	conflicts  atomic.Int64 // transactions run again after a compare failed
	transients atomic.Int64 // tries run again after a transient error or no answer (see retry)

	// fetches holds a *fetchState per namespace: fetches of a namespace
	// through one store go one at a time instead of failing each other's
	// compares, each starting from the record the last one left.
	fetches sync.Map

	seqs sequenceState // sequence.go
}

// Open connects to the etcd cluster dsn names (see the package
// documentation) and checks that it answers a linearizable read. Errors
// name the DSN without its password.
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
		// A connection to a member that stopped answering (paused, cut
		// off) leaves the balancer's rotation after 6 + 2 s; etcd refuses
		// pings more often than every 5 s (--grpc-keepalive-min-time).
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

// SerializationRetries implements allocator.RetryCounter: it returns how
// many transactions the store has run again, since it was opened, because
// a compare found a key changed by another writer (etcd's form of a
// serialization failure).
func (s *Store) SerializationRetries() int64 { return s.conflicts.Load() }

// storeNow returns store time (see clock.go): the node's clock clamped into
// the window the members' clocks agree on, never before a time this store
// returned already. It returns an error wrapping ErrNoStoreTime when the
// members cannot be read or disagree.
func (s *Store) storeNow(ctx context.Context) (time.Time, error) {
	lo, hi, err := s.time.window(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("etcd: %s: %w", s.dsn, err)
	}
	return s.advance(clamp(s.now(), lo, hi)), nil
}

// advance returns t, or the latest store time returned if that is later,
// and records it.
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
// one, but never more than store time now + ttl + the allowed clock offset,
// and never below the stored one. No proposal, whatever the proposing
// node's clock says, goes above the bound.
func boundedCeiling(stored, proposed int64, now time.Time, ttl, offset time.Duration) int64 {
	return max(stored, min(proposed, now.Add(ttl+offset).UnixMilli()))
}
