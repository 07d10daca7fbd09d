// Package leasejson is the JSON of the HTTP lease API's answers, as
// docs/leases.md and docs/openapi.yaml describe them, which httpapi encodes
// (and its tests decode). The Go client speaks the lease API's gRPC
// service instead (client.LeaseStore).
package leasejson

import (
	"time"

	"github.com/idgen-project/idgen/snowflake"
)

// Layout is the Snowflake layout: sign bit 0 | time | datacenter |
// worker | sequence; the body of GET /v1/leases/layout.
type Layout struct {
	TimeBits       int   `json:"time_bits"`
	DatacenterBits int   `json:"datacenter_bits"`
	WorkerBits     int   `json:"worker_bits"`
	SequenceBits   int   `json:"sequence_bits"`
	EpochMS        int64 `json:"epoch_ms"`
}

// LayoutOf returns the JSON of l.
func LayoutOf(l snowflake.Layout) Layout {
	return Layout{TimeBits: l.TimeBits, DatacenterBits: l.DatacenterBits, WorkerBits: l.WorkerBits,
		SequenceBits: l.SequenceBits, EpochMS: l.EpochMillis()}
}

// Snowflake returns the layout j describes, its epoch in UTC; it is not
// validated.
func (j Layout) Snowflake() snowflake.Layout {
	return snowflake.Layout{TimeBits: j.TimeBits, DatacenterBits: j.DatacenterBits, WorkerBits: j.WorkerBits,
		SequenceBits: j.SequenceBits, Epoch: time.UnixMilli(j.EpochMS).UTC()}
}

// Grant is a granted lease, the body of a 201 from POST /v1/leases:
// what a holder in any language needs. PreviousHolder is null when the
// worker ID was free. LeaseSecret is in this answer only: every heartbeat
// and release of the lease sends it.
type Grant struct {
	Datacenter        int64   `json:"datacenter"`
	Worker            int64   `json:"worker"`
	FencingVersion    int64   `json:"fencing_version"`
	Holder            string  `json:"holder"`
	LeaseSecret       string  `json:"lease_secret"`
	FloorMS           int64   `json:"floor_ms"`
	CeilingMS         int64   `json:"ceiling_ms"`
	PreviousHolder    *string `json:"previous_holder"`
	TTLMS             int64   `json:"ttl_ms"`
	HeartbeatMS       int64   `json:"heartbeat_ms"`
	MarginMS          int64   `json:"margin_ms"`
	MaxClockOffsetMS  int64   `json:"max_clock_offset_ms"`
	MaxBackwardWaitMS int64   `json:"max_backward_wait_ms"`
	ExpiresAtMS       int64   `json:"expires_at_ms"`
	DBTimeMS          int64   `json:"db_time_ms"`
	Layout            Layout  `json:"layout"`
}

// Extension is an extended lease, the body of a 200 from POST
// /v1/leases/{dc}/{worker}/heartbeat.
type Extension struct {
	FencingVersion int64 `json:"fencing_version"`
	CeilingMS      int64 `json:"ceiling_ms"`
	TTLMS          int64 `json:"ttl_ms"`
	ExpiresAtMS    int64 `json:"expires_at_ms"`
	DBTimeMS       int64 `json:"db_time_ms"`
}

// Released is the ceiling a release left behind, the body of a 200
// from POST /v1/leases/{dc}/{worker}/release.
type Released struct {
	CeilingMS int64 `json:"ceiling_ms"`
}
