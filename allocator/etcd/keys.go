package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// keyspace is the key prefix of a store, "/<prefix>/".
type keyspace string

func (k keyspace) layout() string   { return string(k) + "layout" }
func (k keyspace) eventSeq() string { return string(k) + "meta/event-seq" }
func (k keyspace) events() string   { return string(k) + "events/" }
func (k keyspace) leases() string   { return string(k) + "leases/" }
func (k keyspace) holders() string  { return string(k) + "holders/" }
func (k keyspace) segments() string { return string(k) + "segments/" }
func (k keyspace) goose() string    { return string(k) + "meta/goose/" }
func (k keyspace) probe() string    { return string(k) + "meta/durability-probe" }

func (k keyspace) event(id int64) string { return fmt.Sprintf("%sevents/%020d", k, id) }
func (k keyspace) worker(dc, w int64) string {
	return fmt.Sprintf("%sleases/%010d/%010d", k, dc, w)
}
func (k keyspace) holder(dc, w int64) string {
	return fmt.Sprintf("%sholders/%010d/%010d", k, dc, w)
}
func (k keyspace) namespace(name string) string { return string(k) + "segments/" + name }
func (k keyspace) gooseVersion(v int64) string  { return fmt.Sprintf("%smeta/goose/%020d", k, v) }

// rangeEnd returns the key just past every key that starts with prefix.
func rangeEnd(prefix string) string { return clientv3.GetPrefixRangeEnd(prefix) }

// leaseRecord is one worker ID's worker_leases row; a zero time is NULL.
type leaseRecord struct {
	DatacenterID   int64     `json:"datacenter_id"`
	WorkerID       int64     `json:"worker_id"`
	Holder         string    `json:"holder,omitempty"`
	FencingVersion int64     `json:"fencing_version"`
	AcquiredAt     time.Time `json:"acquired_at,omitzero"`
	HeartbeatAt    time.Time `json:"heartbeat_at,omitzero"`
	ExpiresAt      time.Time `json:"expires_at,omitzero"`
	ReleasedAt     time.Time `json:"released_at,omitzero"`
	CeilingMS      int64     `json:"ts_ceiling_ms"`
	// FloorMS is ts_floor_ms; 0 (older records) is unknown.
	FloorMS int64  `json:"ts_floor_ms,omitempty"`
	Owner   string `json:"owner,omitempty"`
	// SecretHash is secret_sha256 of a lease-API holder, else "".
	SecretHash string `json:"secret_sha256,omitempty"`
}

func (r leaseRecord) lease() allocator.Lease {
	return allocator.Lease{
		LeaseKey:       allocator.LeaseKey{DatacenterID: r.DatacenterID, WorkerID: r.WorkerID},
		Holder:         r.Holder,
		FencingVersion: r.FencingVersion,
		AcquiredAt:     r.AcquiredAt,
		HeartbeatAt:    r.HeartbeatAt,
		ExpiresAt:      r.ExpiresAt,
		ReleasedAt:     r.ReleasedAt,
		CeilingMS:      r.CeilingMS,
		FloorMS:        r.FloorMS,
		Owner:          r.Owner,
	}
}

// holderRecord is a holder key's value, on the holder's etcd lease.
type holderRecord struct {
	Holder         string `json:"holder"`
	FencingVersion int64  `json:"fencing_version"`
	LeaseTTL       int64  `json:"lease_ttl_s"` // the etcd lease's granted ttl, in seconds
}

type eventRecord struct {
	ID             int64               `json:"id"`
	DatacenterID   int64               `json:"datacenter_id"`
	WorkerID       int64               `json:"worker_id"`
	Holder         string              `json:"holder"`
	FencingVersion int64               `json:"fencing_version"`
	Event          allocator.EventKind `json:"event"`
	At             time.Time           `json:"at"`
	Detail         string              `json:"detail"`
	Owner          string              `json:"owner,omitempty"`
	RequestID      string              `json:"request_id,omitempty"`
}

func (r eventRecord) event() allocator.LeaseEvent {
	return allocator.LeaseEvent{
		ID:             r.ID,
		LeaseKey:       allocator.LeaseKey{DatacenterID: r.DatacenterID, WorkerID: r.WorkerID},
		Holder:         r.Holder,
		FencingVersion: r.FencingVersion,
		Kind:           r.Event,
		At:             r.At.UTC(),
		Detail:         r.Detail,
		Owner:          r.Owner,
		RequestID:      r.RequestID,
	}
}

type layoutRecord struct {
	TimeBits       int       `json:"time_bits"`
	DatacenterBits int       `json:"datacenter_bits"`
	WorkerBits     int       `json:"worker_bits"`
	SequenceBits   int       `json:"sequence_bits"`
	EpochMS        int64     `json:"epoch_ms"`
	Epoch          time.Time `json:"epoch"` // the same instant, for people
	CreatedAt      time.Time `json:"created_at"`
}

func (r layoutRecord) layout() snowflake.Layout {
	return snowflake.Layout{
		TimeBits: r.TimeBits, DatacenterBits: r.DatacenterBits, WorkerBits: r.WorkerBits, SequenceBits: r.SequenceBits,
		Epoch: time.UnixMilli(r.EpochMS).UTC(),
	}
}

// namespaceRecord is the record of one namespace: a row of segments.
type namespaceRecord struct {
	Namespace   string             `json:"namespace"`
	MaxID       int64              `json:"max_id"`
	MaxIDLimit  int64              `json:"max_id_limit,omitempty"` // 0: none
	Step        int64              `json:"step"`
	MinStep     int64              `json:"min_step"`
	MaxStep     int64              `json:"max_step"`
	Mode        allocator.Mode     `json:"mode"`
	Fallback    allocator.Fallback `json:"fallback"`
	Version     int64              `json:"version"`
	CreatedAt   time.Time          `json:"created_at"`
	UpdatedAt   time.Time          `json:"updated_at"`
	Description string             `json:"description"`
	// DeletedAt marks a tombstone, so the name never restarts below max_id.
	DeletedAt time.Time `json:"deleted_at,omitzero"`
	// Stride and Offset interleave the namespace; older records read as 1, 0.
	Stride int64 `json:"stride,omitempty"`
	Offset int64 `json:"offset,omitempty"`
}

func (r namespaceRecord) namespace() allocator.Namespace {
	return allocator.Namespace{
		Name: r.Namespace, MaxID: r.MaxID, MaxIDLimit: r.MaxIDLimit, Step: r.Step, MinStep: r.MinStep, MaxStep: r.MaxStep,
		Mode: r.Mode, Fallback: r.Fallback, Version: r.Version,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), Description: r.Description,
		DeletedAt: r.DeletedAt.UTC(), Stride: max(r.Stride, 1), Offset: r.Offset,
	}
}

// encode returns v as JSON; the records above always encode.
func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("etcd: encode %T: %v", v, err))
	}
	return string(b)
}

func decode(key string, value []byte, v any) error {
	if err := json.Unmarshal(value, v); err != nil {
		return fmt.Errorf("etcd: key %s holds no valid record: %w", key, err)
	}
	return nil
}

// listRecords returns what convert keeps of the records under prefix, in
// key order; what names them in errors.
func listRecords[R, T any](ctx context.Context, cli *clientv3.Client, prefix, what string, convert func(R) (out T, ok bool)) ([]T, error) {
	resp, err := cli.Get(ctx, prefix, clientv3.WithRange(rangeEnd(prefix)))
	if err != nil {
		return nil, fmt.Errorf("etcd: list %s: %w", what, err)
	}
	list := make([]T, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var rec R
		if err := decode(string(kv.Key), kv.Value, &rec); err != nil {
			return nil, err
		}
		if out, ok := convert(rec); ok {
			list = append(list, out)
		}
	}
	return list, nil
}
