// Package audit sends an audit trail of idgen's leases and IDs to a
// columnar store (ClickHouse) or to JSON lines: every lease event
// (acquire, heartbeat, release, takeover, lost, evict, fence) of node
// keepers and lease-API holders alike, every segment fetch, and block
// records saying which holder issued how many IDs over which timestamps.
//
// A Recorder takes events without ever blocking (Record, Block): they go
// into a bounded buffer that one goroutine sends in batches, by size and
// by time, retrying while the sink is down. When the buffer is full, new
// events are dropped and counted. Every event carries a random ID, so a
// batch sent twice (its answer lost) is deduplicated by the sink
// (ClickHouse's ReplacingMergeTree keyed by event_id).
//
// Store wraps an allocator.Store so that the keeper, the lease broker and
// the segment allocator report their events by the calls they make
// anyway; Who answers "which holder issued this ID?" from the store's
// lease_events and, when configured, from ClickHouse.
package audit

import (
	crand "crypto/rand"
	"encoding/hex"
)

// Kind is the kind of an audit event.
type Kind string

// The kinds of audit events. The lease kinds are those of
// allocator.EventKind, plus heartbeat.
const (
	KindAcquire      Kind = "acquire"
	KindTakeover     Kind = "takeover"
	KindHeartbeat    Kind = "heartbeat"
	KindRelease      Kind = "release"
	KindLost         Kind = "lost"
	KindEvict        Kind = "evict"
	KindFence        Kind = "fence"
	KindSegmentFetch Kind = "segment_fetch"
	KindBlock        Kind = "block"
)

// Event is one audit record. Its JSON form is the JSON-lines sink's line
// and the ClickHouse table's row (every field is a column). Times are
// Unix milliseconds; 0 means unknown or not applicable.
type Event struct {
	// ID identifies the event: 32 hex digits, random (NewID).
	ID string `json:"event_id"`
	// TimeMS is when the node recorded the event, on its clock.
	TimeMS int64 `json:"event_ms"`
	Kind   Kind  `json:"kind"`
	// Node is the holder name of the node that recorded the event.
	Node string `json:"node"`
	// Holder holds the lease the event is about ("api:<token>/<holder>"
	// for a lease-API holder); Owner is the caller a remote holder acts
	// for, or the operator of an eviction; RequestID the request's.
	Holder         string `json:"holder"`
	Owner          string `json:"owner"`
	RequestID      string `json:"request_id"`
	DatacenterID   int64  `json:"datacenter_id"`
	WorkerID       int64  `json:"worker_id"`
	FencingVersion int64  `json:"fencing_version"`
	// FloorMS and CeilingMS are the lease's timestamp bounds after the
	// event (a claim, a heartbeat, a release); DBTimeMS the store's time
	// of the call.
	FloorMS   int64 `json:"floor_ms"`
	CeilingMS int64 `json:"ceiling_ms"`
	DBTimeMS  int64 `json:"db_time_ms"`
	// Namespace, First and Last are a segment fetch's range (First to
	// Last, inclusive).
	Namespace string `json:"namespace"`
	First     int64  `json:"first_id"`
	Last      int64  `json:"last_id"`
	// Count, FromMS and ToMS are a block record's: Count IDs issued under
	// the lease, with timestamps from FromMS to ToMS.
	Count  int64  `json:"count"`
	FromMS int64  `json:"from_ms"`
	ToMS   int64  `json:"to_ms"`
	Detail string `json:"detail"`
}

// NewID returns a new random event ID: 128 bits in 32 hex digits.
func NewID() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}
