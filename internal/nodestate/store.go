package nodestate

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

// Store is an allocator.Store that keeps a node's File up to date with
// what the node's own keeper and segment allocator see the store commit.
// Leases of the lease API's remote holders (allocator.RemoteHolderPrefix)
// are not recorded: a remote holder may heartbeat and release through any
// node, so no one node's file knows its lease's last state.
type Store struct {
	allocator.Store
	file *File
	log  *slog.Logger

	mu     sync.Mutex
	floors map[allocator.LeaseKey]int64 // the floor of each lease the keeper holds through this store
	// failing is set from a raise whose write failed until one succeeds,
	// so that a file that cannot be written is logged once per spell.
	failing atomic.Bool
}

// Wrap returns s recording into f; log receives the failures of raises
// (which do not fail the call: the file then lags behind the store).
func Wrap(s allocator.Store, f *File, log *slog.Logger) *Store {
	return &Store{Store: s, file: f, log: log, floors: map[allocator.LeaseKey]int64{}}
}

// File returns the state file s records into.
func (s *Store) File() *File { return s.file }

func own(holder string) bool { return !strings.HasPrefix(holder, allocator.RemoteHolderPrefix) }

// Claim claims through the store and records the ceiling it committed.
func (s *Store) Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, req)
	if err == nil && own(req.Holder) {
		s.held(res.Lease)
	}
	return res, err
}

// Heartbeat extends the lease through the store and records the ceiling
// it committed.
func (s *Store) Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error) {
	lease, now, err := s.Store.Heartbeat(ctx, req)
	if err == nil && own(req.Holder) {
		s.held(lease)
	}
	return lease, now, err
}

func (s *Store) held(l allocator.Lease) {
	s.mu.Lock()
	s.floors[l.LeaseKey] = l.FloorMS
	s.mu.Unlock()
	s.raised(s.file.RaiseCeiling(l.LeaseKey, l.CeilingMS))
}

// Release first lowers the file's ceiling of the lease to what the
// release will leave in the store (allocator.ReleaseCeiling of the lease's
// floor and req.LastTimestampMS), then releases. When that write fails it
// does not release: the lease then expires with its ceiling in place,
// which is safe, where a release would leave the file above the store.
func (s *Store) Release(ctx context.Context, req allocator.ReleaseRequest) (int64, error) {
	if own(req.Holder) {
		s.mu.Lock()
		floor, ok := s.floors[req.Key]
		delete(s.floors, req.Key)
		s.mu.Unlock()
		if c, err := allocator.ReleaseCeiling(floor, math.MaxInt64, req.LastTimestampMS); ok && err == nil {
			if err := s.file.LowerCeiling(req.Key, c); err != nil {
				return 0, fmt.Errorf("release worker %d/%d: %w; the lease is left to expire", req.Key.DatacenterID, req.Key.WorkerID, err)
			}
		}
	}
	return s.Store.Release(ctx, req)
}

// FetchSegment fetches through the store and records the namespace's
// max_id after the fetch.
func (s *Store) FetchSegment(ctx context.Context, name string, n int64) (allocator.Segment, error) {
	seg, err := s.Store.FetchSegment(ctx, name, n)
	if err == nil {
		s.raised(s.file.RaiseCounter(name, seg.Namespace.MaxID))
	}
	return seg, err
}

// ReturnTail first lowers the file's counter of the namespace to newMaxID,
// then gives the tail back; when that write fails it gives nothing back
// (the tail becomes a gap). A tail return refused because someone fetched
// since raises the file's counter to expectMaxID again.
func (s *Store) ReturnTail(ctx context.Context, name string, expectMaxID, expectVersion, newMaxID int64) (bool, error) {
	if err := s.file.LowerCounter(name, newMaxID); err != nil {
		return false, fmt.Errorf("return the tail of %s: %w", name, err)
	}
	ok, err := s.Store.ReturnTail(ctx, name, expectMaxID, expectVersion, newMaxID)
	if err == nil && !ok {
		s.raised(s.file.RaiseCounter(name, expectMaxID))
	}
	return ok, err
}

// Flush writes what the file holds in memory only.
func (s *Store) Flush() error { return s.file.Flush() }

func (s *Store) raised(err error) {
	if err == nil {
		if s.failing.Swap(false) {
			s.log.Info("state file written again", "path", s.file.Path())
		}
		return
	}
	if !s.failing.Swap(true) {
		s.log.Warn("state file not written; the restore check at the next start knows less", "path", s.file.Path(), "err", err)
	}
}
