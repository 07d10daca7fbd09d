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
	Ready      bool          `json:"ready"`
	Reason     string        `json:"reason,omitempty"`
	Lease      *readyLease   `json:"lease"`
	Database   readyDatabase `json:"database"`
	Durability string        `json:"durability,omitempty"`
}

// handleReady serves GET /readyz: 200 while the keeper can prove its
// lease, 503 (with Retry-After) otherwise. Whether the database answers is
// reported but does not decide: inside its lease a node keeps serving
// Snowflake IDs through a database outage. Neither does the durability
// found at start (Config.Durability), which is reported too.
func (s *Server) handleReady(c echo.Context) error {
	out := readyJSON{Ready: true, Durability: s.durability}
	if err := s.lease.Ready(); err != nil {
		out.Ready = false
		out.Reason = err.Error()
	}
	if st := s.lease.Status(); st.Held {
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

// statusPage is what status.html shows, in the order it shows it: what
// needs attention, this node's lease, the charts, the namespaces, the
// worker leases.
type statusPage struct {
	Version, Generated                 string
	Holder                             string
	Attention                          []notice
	Ready                              bool
	Reason                             string
	Held                               bool
	Datacenter, Worker, FencingVersion int64
	ValidFor, Ceiling, LastHeartbeat   string
	ClockOffset                        string
	DatabaseOK                         bool
	DatabaseError                      string
	Durability                         string
	DurabilityOK                       bool
	Policy                             []PolicySetting
	Claims, Takeovers, Lost            int64
	History                            historyView
	Pools                              []workerPool
	Leases                             []statusLease // the rows with a holder
	LeasesError                        string
	Namespaces                         []statusNamespace
	NamespacesError                    string
}

type statusLease struct {
	Datacenter, Worker, FencingVersion          int64
	Holder                                      string
	Mine, Expired                               bool
	ExpiresAt, HeartbeatAt, Ceiling, ReleasedAt string
}

type statusNamespace struct {
	Name, Mode, Fallback, Description string
	MaxID, Step, MinStep, MaxStep     int64
	MaxIDLimit, Limit, Remaining      int64
	Used                              bool
	Runway, BufferStep                int64
	Fetches, FetchErrors, FallbackIDs int64
	Failing                           bool
}

// handleStatus serves GET /, the status page.
func (s *Server) handleStatus(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), storeTimeout)
	defer cancel()
	now := s.statusCfg.Clock.Now()
	st := s.lease.Status()
	readyErr := s.lease.Ready()
	p := statusPage{
		Version:      s.version,
		Generated:    fmtTime(now, time.Time{}),
		Holder:       st.Holder,
		Ready:        st.Ready && readyErr == nil,
		Held:         st.Held,
		ClockOffset:  fmtOffset(st.ClockOffset),
		Claims:       st.Claims,
		Takeovers:    st.Takeovers,
		Lost:         st.Lost,
		Durability:   s.durability,
		DurabilityOK: s.durability == "ok",
		Policy:       s.statusCfg.Policy,
		History:      s.history.charts(now),
	}
	if readyErr != nil {
		p.Reason = readyErr.Error()
	}
	if st.Held {
		p.Datacenter = st.Lease.DatacenterID
		p.Worker = st.Lease.WorkerID
		p.FencingVersion = st.Lease.FencingVersion
		p.ValidFor = max(st.ValidFor, 0).Round(time.Millisecond).String()
		p.Ceiling = fmtCeiling(st.CeilingMS, now)
		p.LastHeartbeat = fmtTime(st.LastHeartbeat, now)
	}
	if err := s.ping.check(ctx); err != nil {
		p.DatabaseError = err.Error()
	} else {
		p.DatabaseOK = true
	}

	dbNow := now.Add(st.ClockOffset)
	if leases, err := s.admin.ListLeases(ctx); err != nil {
		p.LeasesError = err.Error()
	} else {
		p.Pools = workerPools(leases, dbNow)
		for _, l := range leases {
			if l.Holder == "" {
				continue // counted in the pool's summary
			}
			p.Leases = append(p.Leases, statusLease{
				Datacenter:     l.DatacenterID,
				Worker:         l.WorkerID,
				FencingVersion: l.FencingVersion,
				Holder:         l.Holder,
				Mine:           st.Held && l.LeaseKey == st.Lease.LeaseKey && l.Holder == st.Holder,
				Expired:        !leaseLive(l, dbNow),
				ExpiresAt:      fmtTime(l.ExpiresAt, now),
				HeartbeatAt:    fmtTime(l.HeartbeatAt, now),
				Ceiling:        fmtCeiling(l.CeilingMS, now),
				ReleasedAt:     fmtTime(l.ReleasedAt, now),
			})
		}
	}
	if list, err := s.admin.ListNamespaces(ctx); err != nil {
		p.NamespacesError = err.Error()
	} else {
		for _, ns := range list {
			row := statusNamespace{
				Name: ns.Name, Mode: string(ns.Mode), Fallback: string(ns.Fallback), Description: ns.Description,
				MaxID: ns.MaxID, Step: ns.Step, MinStep: ns.MinStep, MaxStep: ns.MaxStep,
				MaxIDLimit: ns.MaxIDLimit, Limit: ns.Limit(), Remaining: ns.Remaining(),
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
	hbFails, lost := s.history.recent(now)
	p.Attention = attention(attentionInput{
		Status:          st,
		ReadyErr:        readyErr,
		DatabaseOK:      p.DatabaseOK,
		Database:        p.DatabaseError,
		Durability:      s.durability,
		LeaseTTL:        s.statusCfg.LeaseTTL,
		MaxClockOffset:  s.statusCfg.MaxClockOffset,
		LeasesError:     p.LeasesError,
		NamespacesError: p.NamespacesError,
		Pools:           p.Pools,
		Namespaces:      p.Namespaces,
		HeartbeatFails:  hbFails,
		Lost:            lost,
		Window:          s.history.window,
	})

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

// fmtTime writes t in UTC to the millisecond, without the date when it is
// the UTC day of today (the page's header gives that day).
func fmtTime(t, today time.Time) string {
	if t.IsZero() {
		return "—"
	}
	t = t.UTC()
	if y, m, d := t.Date(); !today.IsZero() {
		if ty, tm, td := today.UTC().Date(); y == ty && m == tm && d == td {
			return t.Format("15:04:05.000Z")
		}
	}
	return t.Format("2006-01-02 15:04:05.000Z")
}

// fmtCeiling writes a timestamp ceiling as a time and in Unix milliseconds.
func fmtCeiling(ms int64, today time.Time) string {
	if ms <= 0 {
		return "—"
	}
	return fmtTime(time.UnixMilli(ms), today) + " (" + strconv.FormatInt(ms, 10) + ")"
}
