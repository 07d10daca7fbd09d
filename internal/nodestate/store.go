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

// Store is an allocator.Store keeping a File in step with what the node's
// keeper and segment allocator see committed. Remote lease-API holders are
// not recorded: they may use any node.
type Store struct {
	allocator.Store
	file *File
	log  *slog.Logger

	mu     sync.Mutex
	floors map[allocator.LeaseKey]int64 // the floor of each lease the keeper holds through this store
	// failing is set while raises fail, so failure is logged once per spell.
	failing atomic.Bool
}

// Wrap returns s recording into f; failed raises are logged, not returned.
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

// Heartbeat extends the lease and records the committed ceiling.
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

// Release first lowers the file's ceiling to what the release will leave
// (allocator.ReleaseCeiling), then releases; if that write fails it does
// not release, and the lease expires with its ceiling in place.
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

// FetchSegment fetches and records the namespace's new max_id.
func (s *Store) FetchSegment(ctx context.Context, name string, n int64) (allocator.Segment, error) {
	seg, err := s.Store.FetchSegment(ctx, name, n)
	if err == nil {
		s.raised(s.file.RaiseCounter(name, seg.Namespace.MaxID))
	}
	return seg, err
}

// ReturnTail first lowers the file's counter to newMaxID, giving nothing
// back if that fails (a gap); a refused return raises it to expectMaxID.
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
