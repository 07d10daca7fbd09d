// Package audit sends an audit trail of idgen's leases and IDs to
// ClickHouse or JSON lines: every lease event, segment fetch, and block
// records of which holder issued how many IDs over which timestamps.
//
// A Recorder never blocks: events go into a bounded buffer that one
// goroutine sends in batches, retrying while the sink is down; a full
// buffer drops and counts. Random event IDs let the sink deduplicate a
// batch sent twice. Store wraps an allocator.Store to report its calls;
// Who answers which holder issued an ID.
package audit

import (
	crand "crypto/rand"
	"encoding/hex"
)

// Kind is the kind of an audit event.
type Kind string

// The kinds of audit events: allocator.EventKind's, plus heartbeat.
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

// Event is one audit record, a JSON line or a ClickHouse row. Times are
// Unix milliseconds; 0 means unknown or not applicable.
type Event struct {
	// ID identifies the event: 32 hex digits, random (NewID).
	ID string `json:"event_id"`
	// TimeMS is when the node recorded the event, on its clock.
	TimeMS int64 `json:"event_ms"`
	Kind   Kind  `json:"kind"`
	// Node is the holder name of the node that recorded the event.
	Node string `json:"node"`
	// Holder holds the lease; Owner is whom a remote holder acts for (or
	// an eviction's operator); RequestID the request's.
	Holder         string `json:"holder"`
	Owner          string `json:"owner"`
	RequestID      string `json:"request_id"`
	DatacenterID   int64  `json:"datacenter_id"`
	WorkerID       int64  `json:"worker_id"`
	FencingVersion int64  `json:"fencing_version"`
	// FloorMS and CeilingMS are the lease's bounds after the event; DBTimeMS
	// the store's time of the call.
	FloorMS   int64 `json:"floor_ms"`
	CeilingMS int64 `json:"ceiling_ms"`
	DBTimeMS  int64 `json:"db_time_ms"`
	// Namespace, First and Last are a segment fetch's inclusive range.
	Namespace string `json:"namespace"`
	First     int64  `json:"first_id"`
	Last      int64  `json:"last_id"`
	// Count, FromMS and ToMS are a block record's: Count IDs issued with
	// timestamps from FromMS to ToMS.
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
