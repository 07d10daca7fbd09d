package httpapi

import (
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen/internal/probe"
)

// handleHealth serves GET /healthz: the process is alive.
func (s *Server) handleHealth(c echo.Context) error {
	return s.writeJSON(c, http.StatusOK, []byte(`{"status":"ok"}`+"\n"))
}

// readyLease is this node's lease on /readyz; FencingVersion and Holder
// are details (probe.Audience).
type readyLease struct {
	Datacenter     int64  `json:"datacenter"`
	Worker         int64  `json:"worker"`
	FencingVersion int64  `json:"fencing_version,omitempty"`
	ValidForMS     int64  `json:"valid_for_ms"`
	Holder         string `json:"holder,omitempty"`
}

type readyDatabase struct {
	Reachable bool        `json:"reachable"`
	Error     string      `json:"error,omitempty"`
	Alarm     string      `json:"alarm,omitempty"` // etcd's alarms (NOSPACE), explained
	Space     *readySpace `json:"space,omitempty"`
}

// readySpace is the latest sample of the database's space (etcd).
type readySpace struct {
	SizeBytes   int64    `json:"size_bytes"`
	InUseBytes  int64    `json:"in_use_bytes"`
	QuotaBytes  int64    `json:"quota_bytes,omitempty"`
	Growth      float64  `json:"growth_bytes_per_second"`
	Alarms      []string `json:"alarms,omitempty"`
	Compaction  string   `json:"compaction,omitempty"`
	SampledAt   string   `json:"sampled_at,omitempty"`
	SampleError string   `json:"sample_error,omitempty"`
}

// SpaceReporter gives the latest sample of the database's space and
// alarms: *probe.Space.
type SpaceReporter interface {
	Report() probe.SpaceReport
}

type readyJSON struct {
	Ready      bool          `json:"ready"`
	Reason     string        `json:"reason,omitempty"`
	Lease      *readyLease   `json:"lease"`
	Database   readyDatabase `json:"database"`
	Durability string        `json:"durability,omitempty"`
}

// handleReady serves GET /readyz: 200 while the keeper can prove its lease,
// else 503. The database does not decide: a node serves Snowflake IDs
// through its outage.
func (s *Server) handleReady(c echo.Context) error {
	aud := probe.AudienceOf(s.auth, s.publicDetails, c.Request().Header[echo.HeaderAuthorization])
	c.Response().Header().Set(echo.HeaderVary, echo.HeaderAuthorization)
	out := readyJSON{Ready: true, Durability: s.durability}
	if err := s.lease.Ready(); err != nil {
		out.Ready = false
		out.Reason = err.Error()
	}
	if st := s.lease.Status(); st.Held {
		out.Lease = &readyLease{Datacenter: st.Lease.DatacenterID, Worker: st.Lease.WorkerID,
			ValidForMS: max(st.ValidFor.Milliseconds(), 0)}
		if aud.Details {
			out.Lease.FencingVersion, out.Lease.Holder = st.Lease.FencingVersion, st.Holder
		}
	}
	if err := s.db.Ping(c.Request().Context()); err != nil {
		out.Database.Error = probe.StoreFailure(err, aud)
	} else {
		out.Database.Reachable = true
	}
	if s.space != nil {
		r := s.space.Report()
		out.Database.Alarm = r.AlarmText()
		sp := &readySpace{SizeBytes: r.Size, InUseBytes: r.InUse, QuotaBytes: r.Quota, Growth: math.Round(r.Growth),
			Alarms: r.Alarms, Compaction: r.Compaction.Text}
		if r.Sampled {
			sp.SampledAt = r.At.UTC().Format(time.RFC3339Nano)
		}
		if r.Err != nil {
			sp.SampleError = probe.StoreFailure(r.Err, aud)
		}
		out.Database.Space = sp
		if r.NoSpace() && !out.Ready && !strings.Contains(out.Reason, "out of space") {
			out.Reason = "the database is out of space (etcd NOSPACE alarm): " + out.Reason
		}
	}
	status := http.StatusOK
	if !out.Ready {
		status = http.StatusServiceUnavailable
		c.Response().Header().Set(echo.HeaderRetryAfter, "1")
	}
	return s.sendJSON(c, status, out)
}
