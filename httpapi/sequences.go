package httpapi

import (
	"encoding/csv"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator/sequence"
)

// The sequence API under /v1/sequences (docs/sequences.md) over the core's
// idgen.Sequences: reserving, confirming and voiding take the ids scope,
// the rest admin. Numbers are decimal strings, as IDs are.

// sequenceJSON is a sequence's settings and, when read, its status.
type sequenceJSON struct {
	Name        string      `json:"name"`
	Format      string      `json:"format"`
	Reset       string      `json:"reset"`
	TimeZone    string      `json:"time_zone"`
	Start       string      `json:"start"`
	TTLSeconds  float64     `json:"ttl_seconds"`
	Description string      `json:"description"`
	CreatedAt   *time.Time  `json:"created_at"`
	Status      *statusJSON `json:"status,omitempty"`
}

type statusJSON struct {
	Period           string    `json:"period"`
	LastNumber       string    `json:"last_number"`
	OpenReservations int64     `json:"open_reservations"`
	StoreTime        time.Time `json:"store_time"`
}

func toSequenceJSON(seq sequence.Sequence) sequenceJSON {
	return sequenceJSON{
		Name: seq.Name, Format: seq.Format, Reset: string(seq.Reset), TimeZone: seq.Zone,
		Start: strconv.FormatInt(seq.Start, 10), TTLSeconds: seq.TTL.Seconds(), Description: seq.Description,
		CreatedAt: timePtr(seq.CreatedAt),
	}
}

func toStatusJSON(st sequence.Status) *statusJSON {
	return &statusJSON{Period: st.Period, LastNumber: strconv.FormatInt(st.LastNumber, 10), OpenReservations: st.Open, StoreTime: st.StoreTime.UTC()}
}

// reservationJSON is a reservation, its numbers plain and formatted.
type reservationJSON struct {
	ReservationID string    `json:"reservation_id"`
	Sequence      string    `json:"sequence"`
	Period        string    `json:"period"`
	Numbers       []string  `json:"numbers"`
	Formatted     []string  `json:"formatted"`
	State         string    `json:"state"`
	Caller        string    `json:"caller"`
	RequestID     string    `json:"request_id"`
	ReservedAt    time.Time `json:"reserved_at"`
	ExpiresAt     time.Time `json:"expires_at"`
}

func toReservationJSON(r sequence.Reservation) reservationJSON {
	nums := make([]string, r.Count)
	for i := range nums {
		nums[i] = strconv.FormatInt(r.First+int64(i), 10)
	}
	return reservationJSON{
		ReservationID: r.ID, Sequence: r.Sequence, Period: r.Period, Numbers: nums, Formatted: r.Formatted,
		State: string(r.State), Caller: r.Caller, RequestID: r.RequestID,
		ReservedAt: r.ReservedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(),
	}
}

// entryJSON is a row of the ledger.
type entryJSON struct {
	Period        string     `json:"period"`
	Number        string     `json:"number"`
	Formatted     string     `json:"formatted"`
	State         string     `json:"state"`
	ReservationID string     `json:"reservation_id"`
	Caller        string     `json:"caller"`
	RequestID     string     `json:"request_id"`
	ReservedAt    time.Time  `json:"reserved_at"`
	ExpiresAt     time.Time  `json:"expires_at"`
	SettledAt     *time.Time `json:"settled_at"`
}

func toEntryJSON(e sequence.Entry) entryJSON {
	return entryJSON{
		Period: e.Period, Number: strconv.FormatInt(e.Number, 10), Formatted: e.Formatted, State: string(e.State),
		ReservationID: e.ReservationID, Caller: e.Caller, RequestID: e.RequestID,
		ReservedAt: e.ReservedAt.UTC(), ExpiresAt: e.ExpiresAt.UTC(), SettledAt: timePtr(e.SettledAt),
	}
}

// Sequences returns the sequence core the server serves (nil for none).
func (s *Server) Sequences() *idgen.Sequences { return s.seqs }

// addSequenceRoutes registers /v1/sequences; without a sequence core
// every route answers 404.
func (s *Server) addSequenceRoutes(e *echo.Echo) {
	admin, ids := s.requireScope(idgen.ScopeAdmin), s.requireScope(idgen.ScopeIDs)
	route := func(add addFunc, path string, mw echo.MiddlewareFunc, h echo.HandlerFunc) {
		s.add(add, path, mw(func(c echo.Context) error {
			if s.seqs == nil {
				return &idgen.Error{Code: idgen.NotFound, Detail: "this node's store keeps no sequences"}
			}
			return h(c)
		}))
	}
	route(e.POST, "/v1/sequences", admin, s.handleCreateSequence)
	route(e.GET, "/v1/sequences", admin, s.handleListSequences)
	route(e.GET, "/v1/sequences/:name", admin, s.handleGetSequence)
	route(e.POST, "/v1/sequences/:name/reservations", ids, s.handleReserve)
	route(e.POST, "/v1/sequences/:name/reservations/:id/confirm", ids, s.handleSettle(true))
	route(e.POST, "/v1/sequences/:name/reservations/:id/void", ids, s.handleSettle(false))
	route(e.GET, "/v1/sequences/:name/ledger", admin, s.handleLedger)
	route(e.GET, "/v1/sequences/:name/ledger.csv", admin, s.handleLedgerCSV)
}

// createSequenceRequest is the body of POST /v1/sequences.
type createSequenceRequest struct {
	Name        string   `json:"name"`
	Format      string   `json:"format"`
	Reset       string   `json:"reset"`
	TimeZone    string   `json:"time_zone"`
	Start       *flexInt `json:"start"`
	TTLSeconds  *float64 `json:"ttl_seconds"`
	Description string   `json:"description"`
}

func (s *Server) handleCreateSequence(c echo.Context) error {
	var req createSequenceRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	seq := sequence.Sequence{Name: req.Name, Format: req.Format, Reset: sequence.Reset(req.Reset), Zone: req.TimeZone, Description: req.Description}
	if req.Start != nil {
		seq.Start, seq.StartZero = int64(*req.Start), *req.Start == 0
	}
	if req.TTLSeconds != nil {
		if *req.TTLSeconds <= 0 || *req.TTLSeconds > sequence.MaxTTL.Seconds() {
			return invalidf("ttl_seconds %v: want %v to %v", *req.TTLSeconds, sequence.MinTTL.Seconds(), sequence.MaxTTL.Seconds())
		}
		seq.TTL = time.Duration(*req.TTLSeconds * float64(time.Second)).Round(time.Millisecond)
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	created, err := s.seqs.Create(ctx, seq)
	if err != nil {
		return idgen.StoreError(err, req.Name)
	}
	s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "sequence created",
		slog.String("sequence", created.Name), slog.String("format", created.Format), slog.String("reset", string(created.Reset)),
		slog.String("time_zone", created.Zone))
	c.Response().Header().Set(echo.HeaderLocation, "/v1/sequences/"+created.Name)
	return s.sendJSON(c, http.StatusCreated, toSequenceJSON(created))
}

func (s *Server) handleListSequences(c echo.Context) error {
	ctx, cancel := storeCtx(c)
	defer cancel()
	all, err := s.seqs.List(ctx)
	if err != nil {
		return idgen.StoreError(err, "")
	}
	out := make([]sequenceJSON, 0, len(all))
	for _, seq := range all {
		j := toSequenceJSON(seq)
		if st, err := s.seqs.Status(ctx, seq.Name); err == nil {
			j.Status = toStatusJSON(st)
		}
		out = append(out, j)
	}
	return s.sendJSON(c, http.StatusOK, map[string][]sequenceJSON{"sequences": out})
}

func (s *Server) handleGetSequence(c echo.Context) error {
	ctx, cancel := storeCtx(c)
	defer cancel()
	name := c.Param("name")
	seq, err := s.seqs.Get(ctx, name)
	if err != nil {
		return idgen.StoreError(err, name)
	}
	st, err := s.seqs.Status(ctx, name)
	if err != nil {
		return idgen.StoreError(err, name)
	}
	j := toSequenceJSON(seq)
	j.Status = toStatusJSON(st)
	return s.sendJSON(c, http.StatusOK, j)
}

// reserveRequest is the body of POST /v1/sequences/:name/reservations.
type reserveRequest struct {
	Count flexInt `json:"count"`
}

func (s *Server) handleReserve(c echo.Context) error {
	var req reserveRequest
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if req.Count < 1 || int64(req.Count) > int64(s.seqs.MaxCount()) {
		return invalidf("count %d: want 1 to %d numbers in one reservation", req.Count, s.seqs.MaxCount())
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	name := c.Param("name")
	r, err := s.seqs.Reserve(ctx, callerOf(c), name, int(req.Count))
	if err != nil {
		return idgen.StoreError(err, name)
	}
	return s.sendJSON(c, http.StatusCreated, toReservationJSON(r))
}

func (s *Server) handleSettle(confirm bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := storeCtx(c)
		defer cancel()
		name, id := c.Param("name"), c.Param("id")
		settle := s.seqs.Void
		if confirm {
			settle = s.seqs.Confirm
		}
		r, err := settle(ctx, callerOf(c), name, id)
		if err != nil {
			return idgen.StoreError(err, name)
		}
		return s.sendJSON(c, http.StatusOK, toReservationJSON(r))
	}
}

// ledgerQuery reads a ledger request's filters and page: period, state,
// reservation, caller, limit and after (next_after, "PERIOD/NUMBER").
func ledgerQuery(c echo.Context) (sequence.LedgerQuery, error) {
	q := sequence.LedgerQuery{Sequence: c.Param("name")}
	params := c.QueryParams()
	for key := range params {
		switch key {
		case "period", "state", "reservation", "caller", "limit", "after":
		default:
			return q, invalidf("unknown parameter %s: want period, state, reservation, caller, limit or after", key)
		}
	}
	q.Period, q.ReservationID, q.Caller = params.Get("period"), params.Get("reservation"), params.Get("caller")
	if st := params.Get("state"); st != "" {
		state, err := sequence.ParseState(st)
		if err != nil {
			return q, idgen.SequenceError(err, q.Sequence)
		}
		q.State = state
	}
	if l := params.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > sequence.MaxLedgerLimit {
			return q, invalidf("limit %q: want 1 to %d", l, sequence.MaxLedgerLimit)
		}
		q.Limit = n
	}
	if a := params.Get("after"); a != "" {
		period, num, ok := strings.Cut(a, "/")
		n, err := strconv.ParseInt(num, 10, 64)
		if !ok || period == "" || err != nil {
			return q, invalidf("after %q: want the next_after of the page before (PERIOD/NUMBER)", a)
		}
		q.AfterPeriod, q.AfterNumber = period, n
	}
	return q, nil
}

func (s *Server) handleLedger(c echo.Context) error {
	q, err := ledgerQuery(c)
	if err != nil {
		return err
	}
	ctx, cancel := storeCtx(c)
	defer cancel()
	rows, err := s.seqs.Ledger(ctx, q)
	if err != nil {
		return idgen.StoreError(err, q.Sequence)
	}
	out := struct {
		Entries   []entryJSON `json:"entries"`
		NextAfter *string     `json:"next_after"`
	}{Entries: make([]entryJSON, 0, len(rows))}
	for _, e := range rows {
		out.Entries = append(out.Entries, toEntryJSON(e))
	}
	if q.Limit == 0 {
		q.Limit = sequence.DefaultLedgerLimit
	}
	if len(rows) == q.Limit {
		last := rows[len(rows)-1]
		next := last.Period + "/" + strconv.FormatInt(last.Number, 10)
		out.NextAfter = &next
	}
	return s.sendJSON(c, http.StatusOK, out)
}

// maxCSVPages bounds one export: 10,000 pages of 1,000 rows.
const maxCSVPages = 10000

// handleLedgerCSV serves every ledger row the filters select as text/csv,
// written page by page; a failure after the first row cuts the file short.
func (s *Server) handleLedgerCSV(c echo.Context) error {
	q, err := ledgerQuery(c)
	if err != nil {
		return err
	}
	if q.Limit != 0 || q.AfterPeriod != "" {
		return invalidf("the CSV export is whole: limit and after are for the JSON ledger")
	}
	q.Limit = sequence.MaxLedgerLimit
	ctx := c.Request().Context()
	first, err := s.seqs.Ledger(ctx, q)
	if err != nil {
		return idgen.StoreError(err, q.Sequence)
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	h.Set(echo.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="%s-ledger.csv"`, q.Sequence))
	h.Set("Cache-Control", "no-store")
	c.Response().WriteHeader(http.StatusOK)
	w := csv.NewWriter(c.Response())
	header := []string{"sequence", "period", "number", "formatted", "state", "reservation_id", "caller", "request_id", "reserved_at", "expires_at", "settled_at"}
	if err := w.Write(header); err != nil {
		return nil //nolint:nilerr // the client went away; the answer has begun
	}
	rows := first
	for range maxCSVPages {
		for _, e := range rows {
			settled := ""
			if !e.SettledAt.IsZero() {
				settled = e.SettledAt.UTC().Format(time.RFC3339Nano)
			}
			rec := []string{e.Sequence, e.Period, strconv.FormatInt(e.Number, 10), e.Formatted, string(e.State),
				e.ReservationID, e.Caller, e.RequestID, e.ReservedAt.UTC().Format(time.RFC3339Nano),
				e.ExpiresAt.UTC().Format(time.RFC3339Nano), settled}
			if err := w.Write(rec); err != nil {
				return nil //nolint:nilerr // the client went away
			}
		}
		w.Flush()
		if len(rows) < q.Limit {
			return nil
		}
		last := rows[len(rows)-1]
		q.AfterPeriod, q.AfterNumber = last.Period, last.Number
		if rows, err = s.seqs.Ledger(ctx, q); err != nil {
			s.log.LogAttrs(ctx, slog.LevelWarn, "ledger export cut short", slog.String("sequence", q.Sequence), slog.Any("error", err))
			return nil
		}
	}
	return nil
}
