// Package probe is what the node's open routes share: one cached database
// Ping, one background Space sample (etcd), and failures worded for each
// caller's Audience: actionable words for everyone, the store's own text
// (which names users and hosts) only for the admin scope. Lease holders,
// fencing versions and namespaces are details.
package probe

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/idgen-project/idgen"
)

// Bounds of the database ping.
const (
	PingTimeout  = time.Second
	PingCacheFor = time.Second
)

// Pinger checks that the database answers.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Ping pings db at most once per PingCacheFor, bounded by PingTimeout, and
// logs failures and recovery.
type Ping struct {
	db      Pinger
	log     *slog.Logger
	mu      sync.Mutex
	at      time.Time
	err     error
	changes FailureLog
}

// NewPing returns a Ping of db that logs to log (nil: nowhere).
func NewPing(db Pinger, log *slog.Logger) *Ping {
	return &Ping{db: db, log: log}
}

// Ping returns the error of a ping no older than PingCacheFor.
func (p *Ping) Ping(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() && time.Since(p.at) < PingCacheFor {
		return p.err
	}
	// A departing client must not leave a failure in the cache.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), PingTimeout)
	defer cancel()
	p.err = p.db.Ping(ctx)
	p.at = time.Now()
	p.changes.Note(p.log, "database ping", p.err)
	return p.err
}

// FailureLog logs when a repeated check starts failing and when it
// recovers; the zero value is ready.
type FailureLog struct {
	mu      sync.Mutex
	failing bool
}

// Note records the outcome err of one run of the check named what.
func (f *FailureLog) Note(log *slog.Logger, what string, err error) {
	f.mu.Lock()
	changed := f.failing != (err != nil)
	f.failing = err != nil
	f.mu.Unlock()
	switch {
	case !changed || log == nil:
	case err != nil:
		log.Warn(what+" failed", "err", err)
	default:
		log.Info(what + " succeeds again")
	}
}

// Audience is what one request of an open route may see.
type Audience struct {
	// Details: the lease holders, fencing versions and namespaces.
	Details bool
	// Internals: the store's own error text.
	Internals bool
}

// AudienceOf returns what a request may see; bad tokens are not refused.
func AudienceOf(auth *idgen.Authorizer, public bool, authorization []string) Audience {
	admin := false
	if _, none, _ := idgen.ParseBearer(authorization); !none && auth.On(idgen.ScopeAdmin) {
		_, err := auth.Authorize(authorization, idgen.ScopeAdmin)
		admin = err == nil
	}
	return Audience{Details: admin || public, Internals: admin}
}

// StoreFailure words err for a; only internals see err itself.
func StoreFailure(err error, a Audience) string {
	switch {
	case a.Internals:
		return err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "the database did not answer in time"
	}
	return "database unreachable"
}
