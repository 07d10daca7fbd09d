package probe

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

// Readiness is the /readyz report: ready while the keeper can prove its
// lease; the database does not decide.
type Readiness struct {
	Ready      bool          `json:"ready"`
	Reason     string        `json:"reason,omitempty"`
	Lease      *ReadyLease   `json:"lease"`
	Database   ReadyDatabase `json:"database"`
	Durability string        `json:"durability,omitempty"`
}

// ReadyLease is the node's lease; FencingVersion and Holder are details.
type ReadyLease struct {
	Datacenter     int64  `json:"datacenter"`
	Worker         int64  `json:"worker"`
	FencingVersion int64  `json:"fencing_version,omitempty"`
	ValidForMS     int64  `json:"valid_for_ms"`
	Holder         string `json:"holder,omitempty"`
}

// ReadyDatabase is whether the database answers, and its space (etcd).
type ReadyDatabase struct {
	Reachable bool        `json:"reachable"`
	Error     string      `json:"error,omitempty"`
	Alarm     string      `json:"alarm,omitempty"` // etcd's alarms (NOSPACE), explained
	Space     *ReadySpace `json:"space,omitempty"`
}

// ReadySpace is the latest sample of the database's space (etcd).
type ReadySpace struct {
	SizeBytes   int64    `json:"size_bytes"`
	InUseBytes  int64    `json:"in_use_bytes"`
	QuotaBytes  int64    `json:"quota_bytes,omitempty"`
	Growth      float64  `json:"growth_bytes_per_second"`
	Alarms      []string `json:"alarms,omitempty"`
	Compaction  string   `json:"compaction,omitempty"`
	SampledAt   string   `json:"sampled_at,omitempty"`
	SampleError string   `json:"sample_error,omitempty"`
}

// LeaseState is what Ready reads of the node's lease: *allocator.Keeper.
type LeaseState interface {
	Ready() error
	Status() allocator.KeeperStatus
}

// SpaceReporter gives the latest space sample: *Space.
type SpaceReporter interface {
	Report() SpaceReport
}

// Ready reports on the node for aud: lease, ping, and space if set.
func Ready(ctx context.Context, lease LeaseState, db Pinger, space SpaceReporter, aud Audience, durability string) Readiness {
	out := Readiness{Ready: true, Durability: durability}
	if err := lease.Ready(); err != nil {
		out.Ready, out.Reason = false, err.Error()
	}
	if st := lease.Status(); st.Held {
		out.Lease = &ReadyLease{Datacenter: st.Lease.DatacenterID, Worker: st.Lease.WorkerID,
			ValidForMS: max(st.ValidFor.Milliseconds(), 0)}
		if aud.Details {
			out.Lease.FencingVersion, out.Lease.Holder = st.Lease.FencingVersion, st.Holder
		}
	}
	if err := db.Ping(ctx); err != nil {
		out.Database.Error = StoreFailure(err, aud)
	} else {
		out.Database.Reachable = true
	}
	if space == nil {
		return out
	}
	r := space.Report()
	out.Database.Alarm = r.AlarmText()
	sp := &ReadySpace{SizeBytes: r.Size, InUseBytes: r.InUse, QuotaBytes: r.Quota, Growth: math.Round(r.Growth),
		Alarms: r.Alarms, Compaction: r.Compaction.Text}
	if r.Sampled {
		sp.SampledAt = r.At.UTC().Format(time.RFC3339Nano)
	}
	if r.Err != nil {
		sp.SampleError = StoreFailure(r.Err, aud)
	}
	out.Database.Space = sp
	if r.NoSpace() && !out.Ready && !strings.Contains(out.Reason, "out of space") {
		out.Reason = "the database is out of space (etcd NOSPACE alarm): " + out.Reason
	}
	return out
}
