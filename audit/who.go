package audit

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// Holding is one holder's tenure of a worker ID.
type Holding struct {
	Holder         string `json:"holder"`
	Owner          string `json:"owner,omitempty"`
	DatacenterID   int64  `json:"datacenter_id"`
	WorkerID       int64  `json:"worker_id"`
	FencingVersion int64  `json:"fencing_version"`
	// FloorMS and CeilingMS bound the holder's usable timestamps (Unix ms):
	// one above the ceiling its claim found, to the ceiling the next claim
	// found. Fencing keeps successive spans disjoint.
	FloorMS   int64 `json:"floor_ms"`
	CeilingMS int64 `json:"ceiling_ms"`
	// AcquiredAt is the claim's time; EndedAt and EndedBy when and how the
	// tenure ended (zero: not recorded, still held).
	AcquiredAt time.Time `json:"acquired_at"`
	EndedAt    time.Time `json:"ended_at,omitzero"`
	EndedBy    string    `json:"ended_by,omitempty"`
}

// Answer is what Who found for an ID.
type Answer struct {
	ID          int64           `json:"id"`
	Parts       snowflake.Parts `json:"-"`
	TimestampMS int64           `json:"timestamp_ms"` // the ID's time, Unix ms
	Datacenter  int64           `json:"datacenter_id"`
	Worker      int64           `json:"worker_id"`
	// Found says whether Holding's span holds the ID's timestamp.
	Found   bool     `json:"found"`
	Holding *Holding `json:"holding,omitempty"`
	// Source is "store" (lease_events) or "clickhouse".
	Source string `json:"source,omitempty"`
	// Note says why nothing was found, or what to know about the answer.
	Note string `json:"note,omitempty"`
}

// NoHolder is the note of an answer that found no holder.
const NoHolder = "no holder recorded"

// EventSource is what Who reads from the store (allocator.LeaseAdmin).
type EventSource interface {
	ListLeases(ctx context.Context) ([]allocator.Lease, error)
	ListLeaseEvents(ctx context.Context, f allocator.LeaseEventFilter) ([]allocator.LeaseEvent, error)
}

// maxWhoEvents bounds the events Who reads for one worker ID.
const (
	whoPage       = 1000
	maxWhoEvents  = 1_000_000
	maxWhoHistory = maxWhoEvents / whoPage
)

// History returns worker (datacenter, worker)'s holdings, oldest first.
func History(ctx context.Context, src EventSource, datacenter, worker int64) ([]Holding, error) {
	var events []allocator.LeaseEvent
	f := allocator.LeaseEventFilter{Limit: whoPage, DatacenterID: &datacenter, WorkerID: &worker}
	for range maxWhoHistory {
		page, err := src.ListLeaseEvents(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("read lease events: %w", err)
		}
		events = append(events, page...)
		if len(page) < whoPage {
			break
		}
		f.AfterID = page[len(page)-1].ID
	}
	rows, err := src.ListLeases(ctx)
	if err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	var row *allocator.Lease
	for i := range rows {
		if rows[i].DatacenterID == datacenter && rows[i].WorkerID == worker {
			row = &rows[i]
		}
	}
	var hs []Holding
	for _, ev := range events {
		switch ev.Kind {
		case allocator.EventAcquire, allocator.EventTakeover:
			floor, ok := allocator.ClaimFloor(ev.Detail)
			if !ok {
				continue
			}
			if n := len(hs); n > 0 {
				endHolding(&hs[n-1], string(ev.Kind), ev.At, floor-1)
			}
			hs = append(hs, Holding{Holder: ev.Holder, Owner: ev.Owner, DatacenterID: datacenter, WorkerID: worker,
				FencingVersion: ev.FencingVersion, FloorMS: floor, AcquiredAt: ev.At})
		case allocator.EventRelease, allocator.EventLost, allocator.EventEvict, allocator.EventFence:
			if n := len(hs); n > 0 && hs[n-1].FencingVersion == ev.FencingVersion && hs[n-1].EndedAt.IsZero() {
				hs[n-1].EndedAt, hs[n-1].EndedBy = ev.At, string(ev.Kind)
			}
		}
	}
	if n := len(hs); n > 0 && row != nil && row.FencingVersion >= hs[n-1].FencingVersion {
		hs[n-1].CeilingMS = row.CeilingMS
	}
	return hs, nil
}

// endHolding closes h at the next claim, at ceilingMS.
func endHolding(h *Holding, by string, at time.Time, ceilingMS int64) {
	h.CeilingMS = ceilingMS
	if h.EndedAt.IsZero() {
		h.EndedAt, h.EndedBy = at, by+" by the next holder"
	}
}

// Find returns the holding whose span holds timestamp tsMS, if any.
func Find(hs []Holding, tsMS int64) (Holding, bool) {
	i := sort.Search(len(hs), func(i int) bool { return hs[i].FloorMS > tsMS }) - 1
	if i < 0 || hs[i].CeilingMS == 0 || tsMS > hs[i].CeilingMS {
		return Holding{}, false
	}
	return hs[i], true
}

// Who names the holder whose span holds Snowflake ID id's timestamp, from
// the store's lease events, else ClickHouse (ch, if set). It never guesses:
// without a span, Found is false and Note NoHolder.
func Who(ctx context.Context, layout snowflake.Layout, src EventSource, ch *ClickHouse, id int64) (Answer, error) {
	if id < 0 || snowflake.ID(id) > layout.MaxID() {
		return Answer{}, fmt.Errorf("id %d is outside the layout (0 to %d)", id, layout.MaxID())
	}
	p := layout.Decompose(snowflake.ID(id))
	a := Answer{ID: id, Parts: p, TimestampMS: p.Time.UnixMilli(), Datacenter: p.Datacenter, Worker: p.Worker}
	type source struct {
		name string
		load func() ([]Holding, error)
	}
	sources := []source{{"store", func() ([]Holding, error) { return History(ctx, src, p.Datacenter, p.Worker) }}}
	if ch != nil {
		sources = append(sources, source{"clickhouse", func() ([]Holding, error) { return ClickHouseHistory(ctx, ch, p.Datacenter, p.Worker) }})
	}
	var notes []string
	for _, s := range sources {
		hs, err := s.load()
		if err != nil {
			return a, fmt.Errorf("%s: %w", s.name, err)
		}
		if h, ok := Find(hs, a.TimestampMS); ok {
			a.Found, a.Holding, a.Source = true, &h, s.name
			if at := h.AcquiredAt.UnixMilli(); !h.AcquiredAt.IsZero() && a.TimestampMS < at {
				// The floor is only what the claim found: this holder issued
				// the ID only if its clock was that far behind.
				a.Note = fmt.Sprintf("the ID's time is %s before this holder's claim; no earlier holder is recorded, and this one issued it only if its clock was that far behind the store's",
					time.Duration(at-a.TimestampMS)*time.Millisecond)
			}
			return a, nil
		}
		notes = append(notes, fmt.Sprintf("%s: %d holdings of worker %d/%d", s.name, len(hs), p.Datacenter, p.Worker))
	}
	a.Note = NoHolder + " (" + strings.Join(notes, "; ") + ")"
	return a, nil
}

// chClaim is a row of ClickHouseHistory's query.
type chClaim struct {
	Kind           string `json:"kind"`
	Holder         string `json:"holder"`
	Owner          string `json:"owner"`
	FencingVersion int64  `json:"fencing_version,string"`
	FloorMS        int64  `json:"floor_ms,string"`
	CeilingMS      int64  `json:"ceiling_ms,string"`
	EventMS        int64  `json:"event_ms,string"`
}

// ClickHouseHistory returns the audit table's holdings of worker
// (datacenter, worker), oldest first.
func ClickHouseHistory(ctx context.Context, ch *ClickHouse, datacenter, worker int64) ([]Holding, error) {
	rows, err := Query[chClaim](ctx, ch, fmt.Sprintf(`SELECT kind, holder, owner, fencing_version, floor_ms, ceiling_ms, event_ms
FROM %s FINAL
WHERE datacenter_id = %d AND worker_id = %d AND kind IN ('acquire', 'takeover', 'heartbeat', 'release', 'lost', 'evict', 'fence')
ORDER BY fencing_version, event_ms`, ch.Table(), datacenter, worker))
	if err != nil {
		return nil, err
	}
	var hs []Holding
	for _, r := range rows {
		at := time.UnixMilli(r.EventMS).UTC()
		n := len(hs)
		switch r.Kind {
		case "acquire", "takeover":
			if n > 0 {
				endHolding(&hs[n-1], r.Kind, at, r.FloorMS-1)
			}
			hs = append(hs, Holding{Holder: r.Holder, Owner: r.Owner, DatacenterID: datacenter, WorkerID: worker,
				FencingVersion: r.FencingVersion, FloorMS: r.FloorMS, CeilingMS: r.CeilingMS, AcquiredAt: at})
		default:
			if n == 0 || hs[n-1].FencingVersion != r.FencingVersion {
				continue
			}
			if r.Kind == "heartbeat" || r.Kind == "release" {
				if r.Kind == "release" {
					hs[n-1].CeilingMS = r.CeilingMS // lowered to the last timestamp used
				} else {
					hs[n-1].CeilingMS = max(hs[n-1].CeilingMS, r.CeilingMS)
				}
			}
			if r.Kind != "heartbeat" && hs[n-1].EndedAt.IsZero() {
				hs[n-1].EndedAt, hs[n-1].EndedBy = at, r.Kind
			}
		}
	}
	return hs, nil
}
