package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idgen-project/idgen/internal/backoff"
)

// Backoff between tries that met a member without a leader, or that lost
// a compare-and-swap more than conflictsAtOnce times in a row: from retryMin, doubling up to
// retryMax (internal/backoff's equal jitter). Only the context ends the
// retries.
const (
	retryMin = 2 * time.Millisecond
	retryMax = 250 * time.Millisecond
)

// conflictsAtOnce is how many tries in a row that lost a compare retry
// runs again at once, before it backs off as for an error: every such
// loss is another writer's commit, so only a bug could make them endless.
const conflictsAtOnce = 64

// Each try of a retried operation gets attemptMin to finish. A request
// that went to a member which lost its leader waits for etcd's own request
// timeout (7 s with the default election timeout) before it fails, and one
// that went to a paused member, or through a connection that drops
// everything, waits until gRPC's keepalive closes the connection: both
// longer than a lease's heartbeat can wait. The next try goes to another
// member (see memberSet). Once every member has had a try that ran out of
// its bound, the bound doubles with each such try, up to attemptMax: a
// healthy cluster answers a transaction in milliseconds, and the doubling
// keeps one slower than attemptMin from being cut off forever. Each
// operation starts again from attemptMin.
const (
	attemptMin = time.Second
	attemptMax = 8 * time.Second
)

// cleanupTimeout bounds the revocation of an etcd lease that is no longer
// needed; it runs even when the caller's context has ended.
const cleanupTimeout = 5 * time.Second

// retry runs try until it reports done or fails with an error that another
// try cannot cure. try reads what it needs and commits with a transaction
// whose compares check that nothing it read has changed; it returns
// done=false when they did not hold. retry then runs try again, at once
// (conflictsAtOnce), from the read.
//
// Each try runs under a context of its own, bounded as attemptMin says,
// with the client of one member (memberSet).
// When that bound ran out, or etcd answered that the member has no leader,
// lost it, or timed out waiting for it (transient), retry also runs try
// again: the outcome of the try's transaction is then unknown, and try
// must be written so that running it again after a commit it did not
// learn of is safe (its compares fail, or it finds its own write). Other
// errors end the retries, and so does ctx, with an error that wraps
// ctx.Err() and the last transient error.
func (s *Store) retry(ctx context.Context, op string, try func(ctx context.Context, cli *clientv3.Client) (done bool, err error)) error {
	b := backoff.New(retryMin, retryMax)
	timeout := attemptMin
	timeouts := 0  // tries that ran out of their bound
	conflicts := 0 // tries whose compares failed
	var last error // the last transient error
	for {
		if err := ctx.Err(); err != nil {
			if last != nil {
				return fmt.Errorf("etcd: %s: %w (last try: %w)", op, err, last)
			}
			return fmt.Errorf("etcd: %s: %w", op, err)
		}
		member, cli := s.pick()
		actx, cancel := context.WithTimeout(ctx, timeout)
		done, err := try(actx, cli)
		timedOut := actx.Err() != nil && ctx.Err() == nil
		cancel()
		switch {
		case err == nil && done:
			return nil
		case err == nil:
			s.conflicts.Add(1)
			// A conflict means another writer's transaction committed:
			// the cluster made progress. Try again at once: a loser that
			// backed off would lose every race to the writer that won
			// (its next compare goes out as soon as it learns of its
			// commit), and with a backoff that grows it would starve
			// (docs/benchmarks.md, "strict numbering").
			s.members.followLeader(ctx)
			if conflicts++; conflicts <= conflictsAtOnce {
				continue
			}
		case timedOut:
			last = fmt.Errorf("no answer within %s: %w", timeout, err)
			s.transients.Add(1)
			s.members.avoid(member)
			// At once, on another member if there is one. Once every
			// member had its try, with twice the time: a cluster slower
			// than the bound is still served.
			if timeouts++; timeouts >= s.members.size() {
				timeout = min(2*timeout, attemptMax)
			}
			continue
		case transient(err) && ctx.Err() == nil:
			last = err
			s.transients.Add(1)
			s.members.avoid(member)
		default:
			return noSpace(err)
		}
		if err := b.Wait(ctx); err != nil {
			if last != nil {
				return fmt.Errorf("etcd: %s not retried: %w (last try: %w)", op, err, last)
			}
			return fmt.Errorf("etcd: %s not retried after a conflict: %w", op, err)
		}
	}
}

// transient reports whether err says that the member asked could not
// serve the request now, but another member, or the same one a moment
// later, may: it has no leader, lost it, timed out waiting for it, or
// cannot be reached, or dropped the proposal for want of a leader; or that
// the members' clocks could not be read.
func transient(err error) bool {
	for _, e := range []error{
		ErrNoStoreTime,
		rpctypes.ErrNoLeader, rpctypes.ErrLeaderChanged, rpctypes.ErrTimeout,
		rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost,
		rpctypes.ErrTimeoutWaitAppliedIndex, rpctypes.ErrTooManyRequests,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	// A member that knows of no leader drops a proposal at once; etcd
	// sends raft's error as text, with no code of its own.
	return st.Code() == codes.Unavailable || strings.Contains(st.Message(), "raft proposal dropped")
}

// pick returns the member (its index, -1 for the main client) and client
// of the next try.
func (s *Store) pick() (int, *clientv3.Client) {
	if s.members == nil {
		return -1, s.cli
	}
	return s.members.pick()
}
