// Package probe is what the node's open routes share: /readyz, the status
// page and /metrics check the database through one cached Ping, read its
// space and alarms (etcd) from one Space sampled in the background, and say
// what failed as each caller's Audience may see it: to everyone in words a
// caller can act on ("database unreachable"); the store's own text, which
// names the database's user, hosts, port and key prefix, only to the admin
// scope (and in the log, once per change). The lease holders, fencing
// versions and namespaces are details: shown to the admin scope, and to
// everyone with public details.
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

// Ping is a Pinger that pings db at most once per PingCacheFor, bounded by
// PingTimeout, and logs when pings start failing and recover.
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
	// A client that goes away must not leave a failure in the cache.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), PingTimeout)
	defer cancel()
	p.err = p.db.Ping(ctx)
	p.at = time.Now()
	p.changes.Note(p.log, "database ping", p.err)
	return p.err
}

// FailureLog logs a repeated check's error when it starts failing and a
// line when it succeeds again. Its zero value is ready to use.
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

// AudienceOf returns what a request with the Authorization values may
// see; a missing or wrong token is no refusal on the open routes.
func AudienceOf(auth *idgen.Authorizer, public bool, authorization []string) Audience {
	admin := false
	if _, none, _ := idgen.ParseBearer(authorization); !none && auth.On(idgen.ScopeAdmin) {
		_, err := auth.Authorize(authorization, idgen.ScopeAdmin)
		admin = err == nil
	}
	return Audience{Details: admin || public, Internals: admin}
}

// StoreFailure says what a failed store call means to a caller, the error
// itself only to one who may see internals.
func StoreFailure(err error, a Audience) string {
	switch {
	case a.Internals:
		return err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "the database did not answer in time"
	}
	return "database unreachable"
}
