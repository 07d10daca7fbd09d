package httpapi

import (
	"bytes"
	"context"
	_ "embed"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// handleHealth serves GET /healthz: the process is alive.
func (s *Server) handleHealth(c echo.Context) error {
	return s.writeJSON(c, http.StatusOK, []byte(`{"status":"ok"}`+"\n"))
}

type readyLease struct {
	Datacenter     int64  `json:"datacenter"`
	Worker         int64  `json:"worker"`
	FencingVersion int64  `json:"fencing_version"`
	ValidForMS     int64  `json:"valid_for_ms"`
	Holder         string `json:"holder"`
}

type readyDatabase struct {
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
}

type readyJSON struct {
	Ready    bool          `json:"ready"`
	Reason   string        `json:"reason,omitempty"`
	Lease    *readyLease   `json:"lease"`
	Database readyDatabase `json:"database"`
}

// handleReady serves GET /readyz: 200 while the keeper can prove its
// lease, 503 (with Retry-After) otherwise. Whether the database answers is
// reported but does not decide: inside its lease a node keeps serving
// Snowflake IDs through a database outage.
func (s *Server) handleReady(c echo.Context) error {
	out := readyJSON{Ready: true}
	if err := s.keeper.Ready(); err != nil {
		out.Ready = false
		out.Reason = err.Error()
	}
	if st := s.keeper.Status(); st.Held {
		out.Lease = &readyLease{
			Datacenter:     st.Lease.DatacenterID,
			Worker:         st.Lease.WorkerID,
			FencingVersion: st.Lease.FencingVersion,
			ValidForMS:     max(st.ValidFor.Milliseconds(), 0),
			Holder:         st.Holder,
		}
	}
	if err := s.ping.check(c.Request().Context()); err != nil {
		out.Database.Error = err.Error()
	} else {
		out.Database.Reachable = true
	}
	status := http.StatusOK
	if !out.Ready {
		status = http.StatusServiceUnavailable
		c.Response().Header().Set(echo.HeaderRetryAfter, "1")
	}
	return s.sendJSON(c, status, out)
}

//go:embed status.html
var statusHTML string

// statusTemplate parses the status page; the template is embedded, so an
// error is a bug caught by every test.
func statusTemplate() (*template.Template, error) {
	return template.New("status").Parse(statusHTML)
}

// statusPage is what status.html shows.
type statusPage struct {
	Version, Generated                 string
	Holder                             string
	Ready                              bool
	Reason                             string
	Held                               bool
	Datacenter, Worker, FencingVersion int64
	ValidFor, Ceiling, LastHeartbeat   string
	ClockOffset                        string
	DatabaseOK                         bool
	DatabaseError                      string
	Claims, Takeovers, Lost            int64
	Leases                             []statusLease
	LeasesError                        string
	Namespaces                         []statusNamespace
	NamespacesError                    string
}

type statusLease struct {
	Datacenter, Worker, FencingVersion          int64
	Holder                                      string
	Mine                                        bool
	ExpiresAt, HeartbeatAt, Ceiling, ReleasedAt string
}

type statusNamespace struct {
	Name, Mode, Fallback, Description string
	MaxID, Step, MinStep, MaxStep     int64
	Used                              bool
	Runway, BufferStep                int64
	Fetches, FetchErrors, FallbackIDs int64
	Failing                           bool
}

// handleStatus serves GET /, the status page.
func (s *Server) handleStatus(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), storeTimeout)
	defer cancel()
	st := s.keeper.Status()
	p := statusPage{
		Version:     s.version,
		Generated:   fmtTime(time.Now()),
		Holder:      st.Holder,
		Ready:       st.Ready,
		Held:        st.Held,
		ClockOffset: st.ClockOffset.Round(time.Millisecond).String(),
		Claims:      st.Claims,
		Takeovers:   st.Takeovers,
		Lost:        st.Lost,
	}
	if err := s.keeper.Ready(); err != nil {
		p.Ready = false
		p.Reason = err.Error()
	}
	if st.Held {
		p.Datacenter = st.Lease.DatacenterID
		p.Worker = st.Lease.WorkerID
		p.FencingVersion = st.Lease.FencingVersion
		p.ValidFor = max(st.ValidFor, 0).Round(time.Millisecond).String()
		p.Ceiling = fmtCeiling(st.CeilingMS)
		p.LastHeartbeat = fmtTime(st.LastHeartbeat)
	}
	if err := s.ping.check(ctx); err != nil {
		p.DatabaseError = err.Error()
	} else {
		p.DatabaseOK = true
	}

	if leases, err := s.store.ListLeases(ctx); err != nil {
		p.LeasesError = err.Error()
	} else {
		for _, l := range leases {
			p.Leases = append(p.Leases, statusLease{
				Datacenter:     l.DatacenterID,
				Worker:         l.WorkerID,
				FencingVersion: l.FencingVersion,
				Holder:         l.Holder,
				Mine:           st.Held && l.LeaseKey == st.Lease.LeaseKey && l.Holder == st.Holder,
				ExpiresAt:      fmtTime(l.ExpiresAt),
				HeartbeatAt:    fmtTime(l.HeartbeatAt),
				Ceiling:        fmtCeiling(l.CeilingMS),
				ReleasedAt:     fmtTime(l.ReleasedAt),
			})
		}
	}
	if list, err := s.store.ListNamespaces(ctx); err != nil {
		p.NamespacesError = err.Error()
	} else {
		for _, ns := range list {
			row := statusNamespace{
				Name: ns.Name, Mode: string(ns.Mode), Fallback: string(ns.Fallback), Description: ns.Description,
				MaxID: ns.MaxID, Step: ns.Step, MinStep: ns.MinStep, MaxStep: ns.MaxStep,
			}
			if b, ok := s.segments.NamespaceStats(ns.Name); ok {
				row.Used = true
				row.Runway, row.BufferStep = b.Runway, b.Step
				row.Fetches, row.FetchErrors, row.FallbackIDs = b.Fetches, b.FetchErrors, b.FallbackIDs
				row.Failing = b.Failing
			}
			p.Namespaces = append(p.Namespaces, row)
		}
	}

	var buf bytes.Buffer
	if err := s.status.Execute(&buf, p); err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	h.Set("X-Content-Type-Options", "nosniff")
	c.Response().WriteHeader(http.StatusOK)
	_, err := c.Response().Write(buf.Bytes())
	return err
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func fmtCeiling(ms int64) string {
	if ms <= 0 {
		return "—"
	}
	return fmtTime(time.UnixMilli(ms)) + " (" + strconv.FormatInt(ms, 10) + ")"
}
