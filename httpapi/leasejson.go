package httpapi

import "github.com/idgen-project/idgen/snowflake"

// The JSON bodies of the lease API's answers (docs/leases.md,
// docs/openapi.yaml); the Go client speaks its gRPC service instead.

// LeaseLayout is the Snowflake layout: sign bit 0 | time | datacenter |
// worker | sequence; the body of GET /v1/leases/layout.
type LeaseLayout struct {
	TimeBits       int   `json:"time_bits"`
	DatacenterBits int   `json:"datacenter_bits"`
	WorkerBits     int   `json:"worker_bits"`
	SequenceBits   int   `json:"sequence_bits"`
	EpochMS        int64 `json:"epoch_ms"`
}

func leaseLayoutOf(l snowflake.Layout) LeaseLayout {
	return LeaseLayout{TimeBits: l.TimeBits, DatacenterBits: l.DatacenterBits, WorkerBits: l.WorkerBits,
		SequenceBits: l.SequenceBits, EpochMS: l.EpochMillis()}
}

// LeaseGrant is a 201 from POST /v1/leases. PreviousHolder is null for a
// free worker ID; LeaseSecret is in this answer only.
type LeaseGrant struct {
	Datacenter        int64       `json:"datacenter"`
	Worker            int64       `json:"worker"`
	FencingVersion    int64       `json:"fencing_version"`
	Holder            string      `json:"holder"`
	LeaseSecret       string      `json:"lease_secret"`
	FloorMS           int64       `json:"floor_ms"`
	CeilingMS         int64       `json:"ceiling_ms"`
	PreviousHolder    *string     `json:"previous_holder"`
	TTLMS             int64       `json:"ttl_ms"`
	HeartbeatMS       int64       `json:"heartbeat_ms"`
	MarginMS          int64       `json:"margin_ms"`
	MaxClockOffsetMS  int64       `json:"max_clock_offset_ms"`
	MaxBackwardWaitMS int64       `json:"max_backward_wait_ms"`
	ExpiresAtMS       int64       `json:"expires_at_ms"`
	DBTimeMS          int64       `json:"db_time_ms"`
	Layout            LeaseLayout `json:"layout"`
}

// LeaseExtension is an extended lease, the body of a 200 from POST
// /v1/leases/{dc}/{worker}/heartbeat.
type LeaseExtension struct {
	FencingVersion int64 `json:"fencing_version"`
	CeilingMS      int64 `json:"ceiling_ms"`
	TTLMS          int64 `json:"ttl_ms"`
	ExpiresAtMS    int64 `json:"expires_at_ms"`
	DBTimeMS       int64 `json:"db_time_ms"`
}

// LeaseReleased is the ceiling a release left behind, the body of a 200
// from POST /v1/leases/{dc}/{worker}/release.
type LeaseReleased struct {
	CeilingMS int64 `json:"ceiling_ms"`
}
