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

// Backoff after a leaderless member or more than conflictsAtOnce lost
// compares in a row: equal jitter from retryMin up to retryMax, until ctx ends.
const (
	retryMin = 2 * time.Millisecond
	retryMax = 250 * time.Millisecond
)

// conflictsAtOnce is how many lost compares in a row are retried at once;
// each is another writer's commit, so only a bug makes them endless.
const conflictsAtOnce = 64

// Each try gets attemptMin, far less than a leaderless or paused member
// can take, so the next try goes elsewhere; once every member timed out
// the bound doubles per try up to attemptMax.
const (
	attemptMin = time.Second
	attemptMax = 8 * time.Second
)

// cleanupTimeout bounds revoking an unneeded etcd lease, even after ctx ends.
const cleanupTimeout = 5 * time.Second

// retry runs try until done or an error another try cannot cure. try reads
// and commits with compares on what it read, returning done=false when
// they fail; retry then runs it again at once. Each try has its own bounded
// context and one member's client. On a timeout or a transient error the
// outcome is unknown and try runs again, so try must be safe to rerun
// after an unseen commit. ctx ending returns an error wrapping ctx.Err()
// and the last transient error.
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
			// A conflict is another writer's commit. Retry at once: a loser
			// that backed off would lose every race and starve
			// (docs/benchmarks.md, "strict numbering").
			s.members.followLeader(ctx)
			if conflicts++; conflicts <= conflictsAtOnce {
				continue
			}
		case timedOut:
			last = fmt.Errorf("no answer within %s: %w", timeout, err)
			s.transients.Add(1)
			s.members.avoid(member)
			// At once, on another member; once all had a try, with twice the time.
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

// transient reports whether another member, or the same one later, may
// serve the request: no leader, unreachable, a dropped proposal, or
// unreadable member clocks.
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
	// A leaderless member drops proposals; etcd sends it as text only.
	return st.Code() == codes.Unavailable || strings.Contains(st.Message(), "raft proposal dropped")
}

// pick returns the next try's member index (-1: main client) and client.
func (s *Store) pick() (int, *clientv3.Client) {
	if s.members == nil {
		return -1, s.cli
	}
	return s.members.pick()
}
