// Package statuspage is idgen's HTML status page (GET /): notices, this
// node's lease, charts of the last minutes, namespaces and worker leases.
// Charts are server-drawn SVG; nothing loads from elsewhere. What each
// caller sees follows package probe's rule.
package statuspage

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/probe"
	"github.com/idgen-project/idgen/snowflake"
)

// storeTimeout bounds the store reads of one page.
const storeTimeout = 5 * time.Second

// Counters counts the IDs handed out: the core's *idgen.Service.
type Counters interface {
	Issued(src idgen.Source) int64
}

// LeaseReporter reports on the node's lease: its *allocator.Keeper.
type LeaseReporter interface {
	Ready() error
	Status() allocator.KeeperStatus
}

// SegmentReporter reports on the namespaces: *allocator.Segments.
type SegmentReporter interface {
	NamespaceStats(name string) (allocator.SegmentStats, bool)
	Stats() []allocator.SegmentStats
}

// Store is what the page reads of the database.
type Store interface {
	ListLeases(ctx context.Context) ([]allocator.Lease, error)
	ListNamespaces(ctx context.Context) ([]allocator.Namespace, error)
}

// Config configures a Page; the fields up to Database are required.
type Config struct {
	Service  Counters
	Auth     *idgen.Authorizer
	Lease    LeaseReporter
	Segments SegmentReporter
	Store    Store
	// Database is pinged for the page (the node's shared probe.Ping).
	Database probe.Pinger
	Logger   *slog.Logger // nil discards
	Version  string       // "" is "dev"
	// Durability is the start check's result; "" leaves it out.
	Durability string
	// PublicDetails shows the details to every caller.
	PublicDetails bool

	// HistoryInterval and HistoryWindow set the charts' sampling and span
	// (at most MaxHistorySamples intervals); zero means the defaults.
	HistoryInterval, HistoryWindow time.Duration
	// Clock stamps the samples and the page; nil is the system clock.
	Clock snowflake.Clock
	// LeaseTTL and MaxClockOffset are the keeper's, for warnings at half
	// of each; zero leaves them out.
	LeaseTTL, MaxClockOffset time.Duration
	// Policy is shown as a table in this order; nil leaves it out.
	Policy []PolicySetting
	// Space, when set, is the node's *probe.Space (etcd).
	Space SpaceReporter
	// Sequences, when set, are listed with their current status.
	Sequences SequenceReader
	// Audit, when set, says when the audit trail needs attention.
	Audit AuditReporter
}

// AuditReporter says when the audit trail needs attention (ok, with the
// line's title and detail).
type AuditReporter interface {
	Notice() (title, detail string, ok bool)
}

// SpaceReporter gives the latest space sample: *probe.Space.
type SpaceReporter interface {
	Report() probe.SpaceReport
}

// PolicySetting is a policy table row: setting, value and serve's flag
// (without dashes; "" for none).
type PolicySetting struct {
	Name, Value, Flag string
}

// Page serves the status page; its History samples once started.
type Page struct {
	cfg                        Config
	log                        *slog.Logger
	history                    *History
	leasesRead, namespacesRead probe.FailureLog
}

//go:embed status.html
var statusHTML string

var tmpl = template.Must(template.New("status").Parse(statusHTML))

// New returns the Page of cfg, or why cfg is incomplete or out of range.
func New(cfg Config) (*Page, error) {
	switch {
	case cfg.Service == nil, cfg.Auth == nil, cfg.Lease == nil, cfg.Segments == nil, cfg.Store == nil, cfg.Database == nil:
		return nil, errors.New("statuspage: Service, Auth, Lease, Segments, Store and Database are required")
	}
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("status page: %w", err)
	}
	p := &Page{cfg: cfg, log: cfg.Logger}
	p.history = newHistory(cfg, p.readSample)
	return p, nil
}

// History returns the charts' samples; its owner calls Start and Close.
func (p *Page) History() *History { return p.history }

// view is what status.html shows; without details, Holder, FencingVersion,
// Leases and Namespaces are empty.
type view struct {
	Details                            bool
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
	Space                              string // the database's size against its quota; "" without a sample
	SpaceOK                            bool
	Compaction                         string
	Policy                             []PolicySetting
	Claims, Takeovers, Lost            int64
	History                            historyView
	Pools                              []workerPool
	Leases                             []leaseRow // the rows with a holder
	LeasesError                        string
	Namespaces                         []namespaceRow
	NamespacesError                    string
	HasSequences                       bool
	Sequences                          []sequenceRow
	SequencesError                     string
}

type leaseRow struct {
	Datacenter, Worker, FencingVersion          int64
	Holder                                      string
	Mine, Expired                               bool
	ExpiresAt, HeartbeatAt, Ceiling, ReleasedAt string
}

type namespaceRow struct {
	Name, Mode, Fallback, Description string
	MaxID, Step, MinStep, MaxStep     int64
	MaxIDLimit, Limit, Remaining      int64
	Used                              bool
	Runway, BufferStep                int64
	Fetches, FetchErrors, FallbackIDs int64
	Failing                           bool
}

// Serve answers GET /; its error (a bug) is the server's to answer.
func (p *Page) Serve(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	aud := probe.AudienceOf(p.cfg.Auth, p.cfg.PublicDetails, r.Header["Authorization"])
	now := p.cfg.Clock.Now()
	st := p.cfg.Lease.Status()
	readyErr := p.cfg.Lease.Ready()
	v := view{Details: aud.Details, Version: p.cfg.Version, Generated: fmtTime(now, time.Time{}),
		Ready: st.Ready && readyErr == nil, Held: st.Held, ClockOffset: fmtOffset(st.ClockOffset),
		Claims: st.Claims, Takeovers: st.Takeovers, Lost: st.Lost,
		Durability: p.cfg.Durability, DurabilityOK: p.cfg.Durability == "ok", Policy: p.cfg.Policy,
		History: p.history.charts(now, aud.Details)}
	if aud.Details {
		v.Holder = st.Holder
	}
	if readyErr != nil {
		v.Reason = readyErr.Error()
	}
	if st.Held {
		v.Datacenter, v.Worker = st.Lease.DatacenterID, st.Lease.WorkerID
		if aud.Details {
			v.FencingVersion = st.Lease.FencingVersion
		}
		v.ValidFor = max(st.ValidFor, 0).Round(time.Millisecond).String()
		v.Ceiling = fmtCeiling(st.CeilingMS, now)
		v.LastHeartbeat = fmtTime(st.LastHeartbeat, now)
	}
	if err := p.cfg.Database.Ping(ctx); err != nil {
		v.DatabaseError = probe.StoreFailure(err, aud)
	} else {
		v.DatabaseOK = true
	}

	dbNow := now.Add(st.ClockOffset)
	leases, err := p.cfg.Store.ListLeases(ctx)
	p.leasesRead.Note(p.log, "status page: reading the lease table", err)
	if err != nil {
		v.LeasesError = probe.StoreFailure(err, aud)
	} else {
		v.Pools = workerPools(leases, dbNow)
		for _, l := range leases {
			if l.Holder == "" || !aud.Details {
				continue // counted in the pool's summary
			}
			v.Leases = append(v.Leases, leaseRow{Datacenter: l.DatacenterID, Worker: l.WorkerID, FencingVersion: l.FencingVersion,
				Holder:    l.Holder,
				Mine:      st.Held && l.LeaseKey == st.Lease.LeaseKey && l.Holder == st.Holder,
				Expired:   !leaseLive(l, dbNow),
				ExpiresAt: fmtTime(l.ExpiresAt, now), HeartbeatAt: fmtTime(l.HeartbeatAt, now),
				Ceiling: fmtCeiling(l.CeilingMS, now), ReleasedAt: fmtTime(l.ReleasedAt, now)})
		}
	}
	list, err := p.cfg.Store.ListNamespaces(ctx)
	p.namespacesRead.Note(p.log, "status page: reading the namespaces", err)
	if err != nil {
		v.NamespacesError = probe.StoreFailure(err, aud)
		list = nil
	}
	for _, ns := range list {
		row := namespaceRow{
			Name: ns.Name, Mode: string(ns.Mode), Fallback: string(ns.Fallback), Description: ns.Description,
			MaxID: ns.MaxID, Step: ns.Step, MinStep: ns.MinStep, MaxStep: ns.MaxStep,
			MaxIDLimit: ns.MaxIDLimit, Limit: ns.Limit(), Remaining: ns.Remaining(),
		}
		if b, ok := p.cfg.Segments.NamespaceStats(ns.Name); ok {
			row.Used, row.Runway, row.BufferStep, row.Failing = true, b.Runway, b.Step, b.Failing
			row.Fetches, row.FetchErrors, row.FallbackIDs = b.Fetches, b.FetchErrors, b.FallbackIDs
		}
		v.Namespaces = append(v.Namespaces, row)
	}
	if p.cfg.Sequences != nil && aud.Details {
		v.HasSequences = true
		v.Sequences, err = p.sequenceRows(ctx)
		if err != nil {
			v.SequencesError = probe.StoreFailure(err, aud)
		}
	}
	var space *probe.SpaceReport
	if p.cfg.Space != nil {
		r := p.cfg.Space.Report()
		space = &r
		v.Space, v.SpaceOK, v.Compaction = spaceText(r), len(r.Alarms) == 0 && r.Share() < probe.SpaceAttention, r.Compaction.Text
	}
	hbFails, lost := p.history.recent(now)
	v.Attention = attention(attentionInput{Status: st, ReadyErr: readyErr, DatabaseOK: v.DatabaseOK, Database: v.DatabaseError,
		Durability: p.cfg.Durability, LeaseTTL: p.cfg.LeaseTTL, MaxClockOffset: p.cfg.MaxClockOffset,
		LeasesError: v.LeasesError, NamespacesError: v.NamespacesError, Pools: v.Pools, Namespaces: v.Namespaces,
		HeartbeatFails: hbFails, Lost: lost, Window: p.history.window, HideNames: !aud.Details, Space: space})
	if p.cfg.Audit != nil {
		if title, detail, ok := p.cfg.Audit.Notice(); ok {
			v.Attention = append(v.Attention, notice{Severity: warning, Title: title, Detail: detail})
		}
	}
	if !aud.Details {
		v.Namespaces = nil // counted in the notices, not named
	}

	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, v); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=UTF-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Vary", "Authorization")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(buf.Bytes())
	return err
}

// fmtTime writes t in UTC to the ms, without today's date.
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
