package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator/sequence"
)

// SequenceStore is a sequence store whose time a test can move.
type SequenceStore interface {
	sequence.Store
	sequence.TimeShifter
}

// RunSequences runs the sequence suite, each store on its own empty,
// migrated database; time moves by ShiftTime, never by waiting.
func RunSequences(t *testing.T, open func(t *testing.T) SequenceStore) {
	t.Helper()
	for _, tc := range sequenceSuite {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, open(t)) })
	}
}

var sequenceSuite = []struct {
	name string
	run  func(t *testing.T, s SequenceStore)
}{
	{"CreateGetList", testSequenceCreate},
	{"CreateInvalidChangesNothing", testSequenceCreateInvalid},
	{"ReserveFormatsAndCounts", testSequenceReserve},
	{"ReserveBatchInOrder", testSequenceBatch},
	{"ReserveUnknownSequence", testSequenceUnknown},
	{"ResetDailyAcrossDST", testSequenceDailyDST},
	{"ResetYearlyInZone", testSequenceYearly},
	{"ConfirmAndVoid", testSequenceSettle},
	{"SettleOnlyByCaller", testSequenceNotYours},
	{"ExpiryIsFinal", testSequenceExpiry},
	{"PeriodExhausted", testSequenceExhausted},
	{"LedgerFiltersAndPaging", testSequenceLedger},
	{"Status", testSequenceStatus},
	{"ConcurrentReservesGapFree", testSequenceConcurrent},
	{"ServiceCombinesGapFree", testSequenceService},
	{"ServiceExpiresDueWithoutARead", testSequenceExpireDue},
	{"PruneClosedPeriods", testSequencePrune},
	{"PruneRefusalsChangeNothing", testSequencePruneRefusals},
	{"PruneWaitsForOpenReservations", testSequencePruneOpen},
}

// invoiceSequence is a yearly invoice sequence in Berlin.
func invoiceSequence(name string) sequence.Sequence {
	return sequence.Sequence{
		Name: name, Format: "INV-{yyyy}-{seq:06}", Reset: sequence.ResetYearly, Zone: "Europe/Berlin",
		Start: 1, TTL: time.Minute, Description: "invoices — EU shop",
	}
}

func mustCreateSequence(t *testing.T, s SequenceStore, seq sequence.Sequence) sequence.Sequence {
	t.Helper()
	got, err := s.CreateSequence(t.Context(), seq)
	if err != nil {
		t.Fatalf("CreateSequence(%q): %v", seq.Name, err)
	}
	return got
}

func reserve(t *testing.T, s SequenceStore, name, caller string, counts ...int) []sequence.Reservation {
	t.Helper()
	reqs := make([]sequence.Request, len(counts))
	for i, c := range counts {
		reqs[i] = sequence.Request{ID: fmt.Sprintf("r-%s-%d-%d", caller, time.Now().UnixNano(), i), Count: c, Caller: caller, RequestID: "req-" + caller}
	}
	got, err := s.Reserve(t.Context(), name, reqs)
	if err != nil {
		t.Fatalf("Reserve(%q, %v): %v", name, counts, err)
	}
	if len(got) != len(reqs) {
		t.Fatalf("Reserve(%q): %d reservations, want %d", name, len(got), len(reqs))
	}
	return got
}

// storeNow returns the store's time now (SequenceStatus of name).
func storeNow(t *testing.T, s SequenceStore, name string) time.Time {
	t.Helper()
	st, err := s.SequenceStatus(t.Context(), name)
	if err != nil {
		t.Fatalf("SequenceStatus(%q): %v", name, err)
	}
	return st.StoreTime
}

// moveTo shifts the store's time so that it reads about at.
func moveTo(t *testing.T, s SequenceStore, name string, at time.Time) {
	t.Helper()
	s.ShiftTime(at.Sub(storeNow(t, s, name)))
}

// ledger returns the whole ledger of name, every page.
func ledger(t *testing.T, s SequenceStore, name string) []sequence.Entry {
	t.Helper()
	var all []sequence.Entry
	q := sequence.LedgerQuery{Sequence: name, Limit: 7}
	for range 10000 {
		page, err := s.Ledger(t.Context(), q)
		if err != nil {
			t.Fatalf("Ledger(%q): %v", name, err)
		}
		all = append(all, page...)
		if len(page) < q.Limit {
			return all
		}
		last := page[len(page)-1]
		q.AfterPeriod, q.AfterNumber = last.Period, last.Number
	}
	t.Fatalf("Ledger(%q): more than 10000 pages", name)
	return nil
}

// checkGapFree checks that per period the ledger holds every number from
// start once and no formatted number twice.
func checkGapFree(t *testing.T, entries []sequence.Entry, start int64) map[string]int64 {
	t.Helper()
	last := map[string]int64{}
	formatted := map[string]bool{}
	for _, e := range entries {
		want, ok := last[e.Period]
		if !ok {
			want = start - 1
		}
		if e.Number != want+1 {
			t.Errorf("period %s: number %d follows %d, want %d", e.Period, e.Number, want, want+1)
		}
		last[e.Period] = e.Number
		if formatted[e.Formatted] {
			t.Errorf("formatted number %q twice", e.Formatted)
		}
		formatted[e.Formatted] = true
	}
	return last
}

func testSequenceCreate(t *testing.T, s SequenceStore) {
	want := invoiceSequence("invoices")
	got := mustCreateSequence(t, s, want)
	if got.CreatedAt.IsZero() {
		t.Error("CreatedAt not set")
	}
	read, err := s.GetSequence(t.Context(), "invoices")
	if err != nil {
		t.Fatal(err)
	}
	read.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	if read != want {
		t.Errorf("got %+v, want %+v", read, want)
	}
	zero := sequence.Sequence{Name: "zero", Format: "{seq}", StartZero: true}
	mustCreateSequence(t, s, zero)
	if z, err := s.GetSequence(t.Context(), "zero"); err != nil || z.Start != 0 || !z.StartZero || z.Reset != sequence.ResetNone || z.Zone != "UTC" || z.TTL != sequence.DefaultTTL {
		t.Errorf("defaults: got %+v, %v; want start 0, reset none, zone UTC, ttl %v", z, err, sequence.DefaultTTL)
	}
	if _, err := s.CreateSequence(t.Context(), invoiceSequence("invoices")); !errors.Is(err, sequence.ErrExists) {
		t.Errorf("create again: got %v, want ErrExists", err)
	}
	list, err := s.ListSequences(t.Context())
	if err != nil || len(list) != 2 || list[0].Name != "invoices" || list[1].Name != "zero" {
		t.Errorf("ListSequences: got %v, %v; want invoices, zero", list, err)
	}
	if _, err := s.GetSequence(t.Context(), "nope"); !errors.Is(err, sequence.ErrNotFound) {
		t.Errorf("GetSequence(nope): got %v, want ErrNotFound", err)
	}
}

func testSequenceCreateInvalid(t *testing.T, s SequenceStore) {
	bad := []sequence.Sequence{
		{Name: "a", Format: "INV-{yyyy}"},                                   // no counter
		{Name: "b", Format: "{seq}", Zone: "Europe/Atlantis"},               // unknown zone
		{Name: "c", Format: "INV-{seq:06}", Reset: sequence.ResetDaily},     // daily without the date
		{Name: "d", Format: "{seq:03}", Start: 1000},                        // start too wide
		{Name: "Bad", Format: "{seq}"},                                      // name
		{Name: "e", Format: "{seq}", TTL: time.Hour * 48},                   // ttl
		{Name: "f", Format: "{seq}", Reset: "hourly"},                       // reset
		{Name: "g", Format: "{yyyy}{seq}{MM}", Reset: sequence.ResetYearly}, // unpadded counter before a date
	}
	for _, seq := range bad {
		if _, err := s.CreateSequence(t.Context(), seq); !errors.Is(err, sequence.ErrInvalid) {
			t.Errorf("CreateSequence(%+v): got %v, want ErrInvalid", seq, err)
		}
	}
	if list, err := s.ListSequences(t.Context()); err != nil || len(list) != 0 {
		t.Errorf("after invalid creates: got %v, %v; want no sequence", list, err)
	}
}

func testSequenceReserve(t *testing.T, s SequenceStore) {
	mustCreateSequence(t, s, invoiceSequence("inv"))
	moveTo(t, s, "inv", time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	a := reserve(t, s, "inv", "shop", 3)[0]
	b := reserve(t, s, "inv", "shop", 2)[0]
	if a.First != 1 || a.Count != 3 || b.First != 4 || b.Count != 2 || a.Period != "2026" || b.Period != "2026" {
		t.Fatalf("got %d+%d and %d+%d in %s, %s; want 1+3 and 4+2 in 2026", a.First, a.Count, b.First, b.Count, a.Period, b.Period)
	}
	if want := []string{"INV-2026-000004", "INV-2026-000005"}; !slices.Equal(b.Formatted, want) {
		t.Errorf("formatted: got %v, want %v", b.Formatted, want)
	}
	if a.State != sequence.Reserved || a.Caller != "shop" || a.ID == "" || a.ExpiresAt.Sub(a.ReservedAt) != time.Minute {
		t.Errorf("reservation: got %+v, want reserved by shop, expiring a minute after it was made", a)
	}
	entries := ledger(t, s, "inv")
	if len(entries) != 5 {
		t.Fatalf("ledger: %d rows, want 5", len(entries))
	}
	checkGapFree(t, entries, 1)
	for i, e := range entries {
		wantID := a.ID
		if i >= 3 {
			wantID = b.ID
		}
		if e.State != sequence.Reserved || e.ReservationID != wantID || e.Caller != "shop" || e.RequestID != "req-shop" || !e.SettledAt.IsZero() {
			t.Errorf("row %d: got %+v, want reserved under %s by shop", i, e, wantID)
		}
	}
}

func testSequenceBatch(t *testing.T, s SequenceStore) {
	mustCreateSequence(t, s, sequence.Sequence{Name: "b", Format: "B{seq:04}", Start: 10})
	rs := reserve(t, s, "b", "x", 2, 1, 3)
	next := int64(10)
	for i, r := range rs {
		if r.First != next {
			t.Errorf("request %d: first %d, want %d", i, r.First, next)
		}
		next += int64(r.Count)
	}
	if _, err := s.Reserve(t.Context(), "b", []sequence.Request{{ID: "z", Count: 0}}); !errors.Is(err, sequence.ErrInvalid) {
		t.Errorf("count 0: got %v, want ErrInvalid", err)
	}
	checkGapFree(t, ledger(t, s, "b"), 10)
	if n := len(ledger(t, s, "b")); n != 6 {
		t.Errorf("ledger: %d rows, want 6", n)
	}
}

func testSequenceUnknown(t *testing.T, s SequenceStore) {
	_, err := s.Reserve(t.Context(), "nope", []sequence.Request{{ID: "r", Count: 1}})
	if !errors.Is(err, sequence.ErrNotFound) {
		t.Errorf("got %v, want ErrNotFound", err)
	}
}

// testSequenceDailyDST crosses Berlin midnight on both sides of the autumn
// change (22:00 then 23:00 UTC); each day restarts at start.
func testSequenceDailyDST(t *testing.T, s SequenceStore) {
	mustCreateSequence(t, s, sequence.Sequence{Name: "day", Format: "{yyMMdd}{seq:05}", Reset: sequence.ResetDaily, Zone: "Europe/Berlin", Start: 100})
	steps := []struct {
		at     time.Time
		period string
		first  int64
		text   string
	}{
		{time.Date(2026, 10, 24, 21, 59, 50, 0, time.UTC), "2026-10-24", 100, "26102400100"},
		{time.Date(2026, 10, 24, 21, 59, 55, 0, time.UTC), "2026-10-24", 101, "26102400101"},
		{time.Date(2026, 10, 24, 22, 0, 5, 0, time.UTC), "2026-10-25", 100, "26102500100"},   // 00:00:05 CEST
		{time.Date(2026, 10, 25, 22, 59, 50, 0, time.UTC), "2026-10-25", 101, "26102500101"}, // 23:59:50 CET; at CEST's +2 it would be the 26th
		{time.Date(2026, 10, 25, 23, 0, 5, 0, time.UTC), "2026-10-26", 100, "26102600100"},
	}
	for _, st := range steps {
		moveTo(t, s, "day", st.at)
		r := reserve(t, s, "day", "pos", 1)[0]
		if r.Period != st.period || r.First != st.first || r.Formatted[0] != st.text {
			t.Errorf("at %s: got %s #%d %q, want %s #%d %q", st.at, r.Period, r.First, r.Formatted[0], st.period, st.first, st.text)
		}
	}
	last := checkGapFree(t, ledger(t, s, "day"), 100)
	if want := map[string]int64{"2026-10-24": 101, "2026-10-25": 101, "2026-10-26": 100}; fmt.Sprint(last) != fmt.Sprint(want) {
		t.Errorf("last per period: got %v, want %v", last, want)
	}
}

func testSequenceYearly(t *testing.T, s SequenceStore) {
	mustCreateSequence(t, s, sequence.Sequence{Name: "y", Format: "T{yy}-{seq:03}", Reset: sequence.ResetYearly, Zone: "Asia/Tokyo"})
	moveTo(t, s, "y", time.Date(2026, 12, 31, 14, 59, 50, 0, time.UTC)) // 23:59:50 in Tokyo
	if r := reserve(t, s, "y", "a", 2)[0]; r.Period != "2026" || r.Formatted[1] != "T26-002" {
		t.Errorf("before midnight in Tokyo: got %s %v, want 2026 T26-002", r.Period, r.Formatted)
	}
	s.ShiftTime(20 * time.Second) // 00:00:10 in Tokyo, still 2026 in UTC
	if r := reserve(t, s, "y", "a", 1)[0]; r.Period != "2027" || r.Formatted[0] != "T27-001" {
		t.Errorf("after midnight in Tokyo: got %s %v, want 2027 T27-001", r.Period, r.Formatted)
	}
}

func testSequenceSettle(t *testing.T, s SequenceStore) {
	mustCreateSequence(t, s, invoiceSequence("inv"))
	rs := reserve(t, s, "inv", "shop", 2, 1)
	c, err := s.Settle(t.Context(), "inv", rs[0].ID, "shop", sequence.Confirmed)
	if err != nil || c.State != sequence.Confirmed || c.First != rs[0].First || c.Count != 2 {
		t.Fatalf("confirm: got %+v, %v; want the 2 numbers confirmed", c, err)
	}
	if _, err := s.Settle(t.Context(), "inv", rs[1].ID, "shop", sequence.Voided); err != nil {
		t.Fatalf("void: %v", err)
	}
	for _, again := range []sequence.State{sequence.Voided, sequence.Confirmed} {
		if _, err := s.Settle(t.Context(), "inv", rs[0].ID, "shop", again); !errors.Is(err, sequence.ErrSettled) {
			t.Errorf("%s after confirm: got %v, want ErrSettled", again, err)
		}
	}
	if _, err := s.Settle(t.Context(), "inv", "no-such", "shop", sequence.Confirmed); !errors.Is(err, sequence.ErrReservationNotFound) {
		t.Errorf("unknown reservation: got %v, want ErrReservationNotFound", err)
	}
	if _, err := s.Settle(t.Context(), "inv", rs[1].ID, "shop", sequence.Reserved); !errors.Is(err, sequence.ErrInvalid) {
		t.Errorf("settle as reserved: got %v, want ErrInvalid", err)
	}
	entries := ledger(t, s, "inv")
	want := []sequence.State{sequence.Confirmed, sequence.Confirmed, sequence.Voided}
	for i, e := range entries {
		if e.State != want[i] || e.SettledAt.IsZero() {
			t.Errorf("row %d: got %s settled at %v, want %s with a time", i, e.State, e.SettledAt, want[i])
		}
	}
	// A voided number is never handed out again.
	if r := reserve(t, s, "inv", "shop", 1)[0]; r.First != 4 {
		t.Errorf("after a void: got %d, want 4", r.First)
	}
}

func testSequenceNotYours(t *testing.T, s SequenceStore) {
	mustCreateSequence(t, s, invoiceSequence("inv"))
	r := reserve(t, s, "inv", "alice", 1)[0]
	for _, to := range []sequence.State{sequence.Confirmed, sequence.Voided} {
		if _, err := s.Settle(t.Context(), "inv", r.ID, "mallory", to); !errors.Is(err, sequence.ErrNotYours) {
			t.Errorf("%s by another caller: got %v, want ErrNotYours", to, err)
		}
	}
	if e := ledger(t, s, "inv"); len(e) != 1 || e[0].State != sequence.Reserved {
		t.Errorf("after refusals: got %+v, want the number still reserved", e)
	}
	if _, err := s.Settle(t.Context(), "inv", r.ID, "alice", sequence.Confirmed); err != nil {
		t.Errorf("confirm by its caller: %v", err)
	}
}

func testSequenceExpiry(t *testing.T, s SequenceStore) {
	seq := invoiceSequence("inv")
	seq.TTL = 10 * time.Second
	mustCreateSequence(t, s, seq)
	rs := reserve(t, s, "inv", "shop", 1, 2, 1)
	if _, err := s.Settle(t.Context(), "inv", rs[2].ID, "shop", sequence.Confirmed); err != nil {
		t.Fatal(err)
	}
	s.ShiftTime(11 * time.Second)
	if _, err := s.Settle(t.Context(), "inv", rs[0].ID, "shop", sequence.Confirmed); !errors.Is(err, sequence.ErrExpired) {
		t.Errorf("confirm after expiry: got %v, want ErrExpired", err)
	}
	if _, err := s.Settle(t.Context(), "inv", rs[0].ID, "shop", sequence.Voided); !errors.Is(err, sequence.ErrExpired) {
		t.Errorf("void after expiry: got %v, want ErrExpired", err)
	}
	if n, err := s.ExpireReservations(t.Context(), "inv"); err != nil || n != 2 {
		t.Errorf("ExpireReservations: got %d, %v; want 2 (the second reservation)", n, err)
	}
	if _, err := s.Settle(t.Context(), "inv", rs[1].ID, "shop", sequence.Voided); !errors.Is(err, sequence.ErrExpired) {
		t.Errorf("void after the sweep: got %v, want ErrExpired", err)
	}
	want := []sequence.State{sequence.Expired, sequence.Expired, sequence.Expired, sequence.Confirmed}
	for i, e := range ledger(t, s, "inv") {
		if e.State != want[i] {
			t.Errorf("row %d: got %s, want %s", i, e.State, want[i])
		}
		if e.State == sequence.Expired && !e.SettledAt.Equal(e.ExpiresAt) {
			t.Errorf("row %d: expired, settled at %v, want its expiry %v", i, e.SettledAt, e.ExpiresAt)
		}
	}
}

func testSequenceExhausted(t *testing.T, s SequenceStore) {
	mustCreateSequence(t, s, sequence.Sequence{Name: "small", Format: "S{seq:02}", Start: 97})
	reserve(t, s, "small", "a", 2) // 97, 98
	_, err := s.Reserve(t.Context(), "small", []sequence.Request{{ID: "big", Count: 2}})
	if !errors.Is(err, sequence.ErrPeriodExhausted) {
		t.Errorf("past the width: got %v, want ErrPeriodExhausted", err)
	}
	if e := ledger(t, s, "small"); len(e) != 2 {
		t.Errorf("after the refusal: %d rows, want 2", len(e))
	}
	if r := reserve(t, s, "small", "a", 1)[0]; r.Formatted[0] != "S99" {
		t.Errorf("the last number: got %v, want S99", r.Formatted)
	}
}

func testSequenceLedger(t *testing.T, s SequenceStore) {
	mustCreateSequence(t, s, sequence.Sequence{Name: "m", Format: "{yyyyMM}-{seq:04}", Reset: sequence.ResetMonthly})
	moveTo(t, s, "m", time.Date(2026, 1, 31, 12, 0, 0, 0, time.UTC))
	jan := reserve(t, s, "m", "alice", 3, 2)
	if _, err := s.Settle(t.Context(), "m", jan[1].ID, "alice", sequence.Voided); err != nil {
		t.Fatal(err)
	}
	s.ShiftTime(24 * time.Hour)
	feb := reserve(t, s, "m", "bob", 4)
	all := ledger(t, s, "m")
	if len(all) != 9 || all[0].Period != "2026-01" || all[8].Period != "2026-02" || feb[0].First != 1 {
		t.Fatalf("ledger: %d rows from %s to %s, want 9 from 2026-01 to 2026-02", len(all), all[0].Period, all[len(all)-1].Period)
	}
	checkGapFree(t, all, 1)
	tests := []struct {
		name string
		q    sequence.LedgerQuery
		want int
	}{
		{"period", sequence.LedgerQuery{Period: "2026-02"}, 4},
		{"state", sequence.LedgerQuery{State: sequence.Voided}, 2},
		{"caller", sequence.LedgerQuery{Caller: "alice"}, 5},
		{"reservation", sequence.LedgerQuery{ReservationID: jan[0].ID}, 3},
		{"limit", sequence.LedgerQuery{Limit: 2}, 2},
		{"after", sequence.LedgerQuery{AfterPeriod: "2026-01", AfterNumber: 4}, 5},
	}
	for _, tc := range tests {
		tc.q.Sequence = "m"
		got, err := s.Ledger(t.Context(), tc.q)
		if err != nil || len(got) != tc.want {
			t.Errorf("%s: got %d rows, %v; want %d", tc.name, len(got), err, tc.want)
		}
	}
	if _, err := s.Ledger(t.Context(), sequence.LedgerQuery{Sequence: "m", Limit: sequence.MaxLedgerLimit + 1}); !errors.Is(err, sequence.ErrInvalid) {
		t.Errorf("limit above the cap: got %v, want ErrInvalid", err)
	}
	if _, err := s.Ledger(t.Context(), sequence.LedgerQuery{Sequence: "m", State: "lost"}); !errors.Is(err, sequence.ErrInvalid) {
		t.Errorf("unknown state: got %v, want ErrInvalid", err)
	}
}

func testSequenceStatus(t *testing.T, s SequenceStore) {
	mustCreateSequence(t, s, invoiceSequence("inv"))
	moveTo(t, s, "inv", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	st, err := s.SequenceStatus(t.Context(), "inv")
	if err != nil || st.Period != "2026" || st.LastNumber != 0 || st.Open != 0 {
		t.Fatalf("fresh: got %+v, %v; want 2026, last 0, none open", st, err)
	}
	rs := reserve(t, s, "inv", "a", 2, 3)
	if _, err := s.Settle(t.Context(), "inv", rs[0].ID, "a", sequence.Confirmed); err != nil {
		t.Fatal(err)
	}
	st, err = s.SequenceStatus(t.Context(), "inv")
	if err != nil || st.LastNumber != 5 || st.Open != 3 {
		t.Errorf("after 5 reserved, 2 confirmed: got %+v, %v; want last 5, 3 open", st, err)
	}
	if _, err := s.SequenceStatus(t.Context(), "nope"); !errors.Is(err, sequence.ErrNotFound) {
		t.Errorf("unknown: got %v, want ErrNotFound", err)
	}
}

// testSequenceConcurrent: concurrent reservations are unique, consecutive
// and the ledger holds 1..N.
func testSequenceConcurrent(t *testing.T, s SequenceStore) {
	mustCreateSequence(t, s, sequence.Sequence{Name: "c", Format: "C{seq:08}"})
	reserveConcurrently(t, s, "c", 8, 15, func(w, i int) (sequence.Reservation, error) {
		got, err := s.Reserve(t.Context(), "c", []sequence.Request{{ID: fmt.Sprintf("w%d-%d", w, i), Count: 1 + i%3, Caller: "w"}})
		if err != nil {
			return sequence.Reservation{}, err
		}
		return got[0], nil
	})
}

// testSequenceService: the same through a sequence.Service, with no more
// round trips than reservations.
func testSequenceService(t *testing.T, s SequenceStore) {
	mustCreateSequence(t, s, sequence.Sequence{Name: "svc", Format: "S{seq:08}"})
	svc := sequence.NewService(s, sequence.Settings{})
	const callers, each = 16, 10
	reserveConcurrently(t, s, "svc", callers, each, func(c, i int) (sequence.Reservation, error) {
		caller := fmt.Sprintf("c%d", c)
		r, err := svc.Reserve(t.Context(), "svc", 1+(c+i)%4, caller, "")
		if err == nil && r.Caller != caller {
			t.Errorf("reservation %s: caller %q, want %q", r.ID, r.Caller, caller)
		}
		return r, err
	})
	if trips := svc.RoundTrips(); trips > callers*each {
		t.Errorf("%d round trips for %d reservations", trips, callers*each)
	}
}

// reserveConcurrently runs reserve(g, i) for i < each in n goroutines g,
// then checks that no number went out twice and the ledger of name holds
// exactly the numbers handed out, under their reservations.
func reserveConcurrently(t *testing.T, s SequenceStore, name string, n, each int, reserve func(g, i int) (sequence.Reservation, error)) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[int64]string{}
		errs []error
	)
	for g := range n {
		wg.Go(func() {
			for i := range each {
				r, err := reserve(g, i)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					for _, num := range r.Numbers() {
						if prev, dup := seen[num]; dup {
							errs = append(errs, fmt.Errorf("number %d given to %s and %s", num, prev, r.ID))
						}
						seen[num] = r.ID
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	entries := ledger(t, s, name)
	if len(entries) != len(seen) {
		t.Errorf("ledger: %d rows, want %d numbers handed out", len(entries), len(seen))
	}
	checkGapFree(t, entries, 1)
	for _, e := range entries {
		if seen[e.Number] != e.ReservationID {
			t.Errorf("number %d: ledger says %s, the caller got it under %s", e.Number, e.ReservationID, seen[e.Number])
		}
	}
}

// testSequenceExpireDue: Service.ExpireDue leaves nothing due.
func testSequenceExpireDue(t *testing.T, s SequenceStore) {
	for _, name := range []string{"a", "b"} {
		seq := invoiceSequence(name)
		seq.TTL = 10 * time.Second
		mustCreateSequence(t, s, seq)
	}
	ra := reserve(t, s, "a", "shop", 2, 1)
	reserve(t, s, "b", "shop", 3)
	if _, err := s.Settle(t.Context(), "a", ra[1].ID, "shop", sequence.Confirmed); err != nil {
		t.Fatal(err)
	}
	svc := sequence.NewService(s, sequence.Settings{})
	if n, err := svc.ExpireDue(t.Context()); err != nil || n != 0 {
		t.Errorf("before the expiry: got %d expired, %v; want 0", n, err)
	}
	s.ShiftTime(11 * time.Second)
	if n, err := svc.ExpireDue(t.Context()); err != nil || n != 5 {
		t.Errorf("after the expiry: got %d expired, %v; want 5 (2 of a, 3 of b)", n, err)
	}
	for _, name := range []string{"a", "b"} {
		if n, err := s.ExpireReservations(t.Context(), name); err != nil || n != 0 {
			t.Errorf("%s after the sweep: ExpireReservations got %d, %v; want 0 left", name, n, err)
		}
	}
	want := map[string][]sequence.State{
		"a": {sequence.Expired, sequence.Expired, sequence.Confirmed},
		"b": {sequence.Expired, sequence.Expired, sequence.Expired},
	}
	for name, states := range want {
		entries := ledger(t, s, name)
		if len(entries) != len(states) {
			t.Fatalf("%s: %d rows, want %d", name, len(entries), len(states))
		}
		for i, e := range entries {
			if e.State != states[i] {
				t.Errorf("%s row %d: got %s, want %s", name, i, e.State, states[i])
			}
		}
	}
}

// monthlySequence is a monthly sequence in UTC with a one-minute ttl.
func monthlySequence(name string) sequence.Sequence {
	return sequence.Sequence{Name: name, Format: "M{yyyyMM}-{seq:04}", Reset: sequence.ResetMonthly, TTL: time.Minute}
}

// periodsOf returns how many ledger rows each period of name holds.
func periodsOf(t *testing.T, s SequenceStore, name string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, e := range ledger(t, s, name) {
		out[e.Period]++
	}
	return out
}

func prunedBefore(t *testing.T, s SequenceStore, name string) string {
	t.Helper()
	seq, err := s.GetSequence(t.Context(), name)
	if err != nil {
		t.Fatalf("GetSequence(%q): %v", name, err)
	}
	return seq.PrunedBefore
}

// testSequencePrune: a dry run deletes nothing; a prune deletes exactly
// the earlier periods, never moves its mark back, and keeps counters.
func testSequencePrune(t *testing.T, s SequenceStore) {
	mustCreateSequence(t, s, monthlySequence("m"))
	moveTo(t, s, "m", time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC))
	jan := reserve(t, s, "m", "shop", 3, 2)
	if _, err := s.Settle(t.Context(), "m", jan[0].ID, "shop", sequence.Confirmed); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settle(t.Context(), "m", jan[1].ID, "shop", sequence.Voided); err != nil {
		t.Fatal(err)
	}
	s.ShiftTime(31 * 24 * time.Hour) // 15 February
	reserve(t, s, "m", "shop", 4)    // expires unsettled
	s.ShiftTime(28 * 24 * time.Hour) // 15 March: the current period
	mar := reserve(t, s, "m", "shop", 1)[0]
	if mar.Period != "2026-03" {
		t.Fatalf("current period: got %s, want 2026-03", mar.Period)
	}
	all := map[string]int{"2026-01": 5, "2026-02": 4, "2026-03": 1}
	if got := periodsOf(t, s, "m"); fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("before: got %v, want %v", got, all)
	}

	if n, err := s.Prune(t.Context(), "m", "2026-03", true); err != nil || n != 9 {
		t.Errorf("dry run before 2026-03: got %d, %v; want 9", n, err)
	}
	if got := periodsOf(t, s, "m"); fmt.Sprint(got) != fmt.Sprint(all) || prunedBefore(t, s, "m") != "" {
		t.Errorf("after the dry run: got %v, pruned before %q; want %v, nothing pruned", got, prunedBefore(t, s, "m"), all)
	}

	steps := []struct {
		before     string
		want       int64
		wantPruned string
		left       map[string]int
	}{
		{"2026-02", 5, "2026-02", map[string]int{"2026-02": 4, "2026-03": 1}},
		{"2026-02", 0, "2026-02", map[string]int{"2026-02": 4, "2026-03": 1}}, // again: nothing left
		{"2026-03", 4, "2026-03", map[string]int{"2026-03": 1}},               // the current period: every closed one
		{"2026-01", 0, "2026-03", map[string]int{"2026-03": 1}},               // the mark never moves back
	}
	for _, st := range steps {
		n, err := s.Prune(t.Context(), "m", st.before, false)
		if err != nil || n != st.want {
			t.Errorf("prune before %s: got %d, %v; want %d", st.before, n, err, st.want)
		}
		if got := periodsOf(t, s, "m"); fmt.Sprint(got) != fmt.Sprint(st.left) {
			t.Errorf("after prune before %s: got %v, want %v", st.before, got, st.left)
		}
		if got := prunedBefore(t, s, "m"); got != st.wantPruned {
			t.Errorf("after prune before %s: pruned before %q, want %q", st.before, got, st.wantPruned)
		}
	}
	if rows, err := s.Ledger(t.Context(), sequence.LedgerQuery{Sequence: "m", Period: "2026-01"}); err != nil || len(rows) != 0 {
		t.Errorf("ledger of pruned 2026-01: got %d rows, %v; want none", len(rows), err)
	}
	if list, err := s.ListSequences(t.Context()); err != nil || len(list) != 1 || list[0].PrunedBefore != "2026-03" || !list[0].Pruned("2026-02") || list[0].Pruned("2026-03") {
		t.Errorf("ListSequences: got %+v, %v; want m pruned before 2026-03", list, err)
	}
	// The counter of the current period stays: the next number follows.
	if r := reserve(t, s, "m", "shop", 1)[0]; r.First != 2 || r.Period != "2026-03" {
		t.Errorf("after the prunes: got #%d of %s, want #2 of 2026-03", r.First, r.Period)
	}
	if st, err := s.SequenceStatus(t.Context(), "m"); err != nil || st.LastNumber != 2 {
		t.Errorf("status after the prunes: got %+v, %v; want last number 2", st, err)
	}
}

// testSequencePruneRefusals: invalid prunes are refused, changing nothing.
func testSequencePruneRefusals(t *testing.T, s SequenceStore) {
	mustCreateSequence(t, s, monthlySequence("m"))
	mustCreateSequence(t, s, sequence.Sequence{Name: "flat", Format: "F{seq:04}"})
	mustCreateSequence(t, s, sequence.Sequence{Name: "d", Format: "{yyMMdd}{seq:03}", Reset: sequence.ResetDaily, Zone: "Europe/Berlin"})
	moveTo(t, s, "m", time.Date(2026, 2, 10, 12, 0, 0, 0, time.UTC))
	reserve(t, s, "m", "shop", 2)
	reserve(t, s, "flat", "shop", 1)
	moveTo(t, s, "m", time.Date(2026, 3, 31, 22, 30, 0, 0, time.UTC)) // 1 April 00:30 in Berlin, still March in UTC
	reserve(t, s, "m", "shop", 1)
	reserve(t, s, "d", "shop", 1)
	tests := []struct {
		name, seq, before string
		want              error
	}{
		{"unknown sequence", "nope", "2026-01", sequence.ErrNotFound},
		{"never resets", "flat", "2026", sequence.ErrInvalid},
		{"never resets, its period", "flat", sequence.NoPeriod, sequence.ErrInvalid},
		{"year of a monthly sequence", "m", "2026", sequence.ErrInvalid},
		{"day of a monthly sequence", "m", "2026-03-01", sequence.ErrInvalid},
		{"month 13", "m", "2026-13", sequence.ErrInvalid},
		{"unpadded month", "m", "2026-3", sequence.ErrInvalid},
		{"two-digit year", "m", "26-03", sequence.ErrInvalid},
		{"empty", "m", "", sequence.ErrInvalid},
		{"text", "m", "last-year", sequence.ErrInvalid},
		{"later than the current period", "m", "2026-04", sequence.ErrInvalid},
		{"a later year", "m", "2027-01", sequence.ErrInvalid},
		// The current period is in the zone: 1 April in Berlin.
		{"day after the current one", "d", "2026-04-02", sequence.ErrInvalid},
		{"30 February", "d", "2026-02-30", sequence.ErrInvalid},
	}
	for _, tc := range tests {
		for _, dry := range []bool{true, false} {
			n, err := s.Prune(t.Context(), tc.seq, tc.before, dry)
			if !errors.Is(err, tc.want) || n != 0 {
				t.Errorf("%s (%s --before %q, dry run %v): got %d, %v; want %v", tc.name, tc.seq, tc.before, dry, n, err, tc.want)
			}
		}
	}
	for name, want := range map[string]int{"m": 3, "flat": 1, "d": 1} {
		if got := len(ledger(t, s, name)); got != want || prunedBefore(t, s, name) != "" {
			t.Errorf("%s after the refusals: %d rows, pruned before %q; want %d rows, nothing pruned", name, got, prunedBefore(t, s, name), want)
		}
	}
	// The current period in the zone is allowed: 1 April in Berlin.
	if n, err := s.Prune(t.Context(), "d", "2026-04-01", false); err != nil || n != 0 {
		t.Errorf("d before its current period 2026-04-01: got %d, %v; want 0 (the one row is of the current period)", n, err)
	}
}

// testSequencePruneOpen: a closed period with an open reservation is not
// pruned until it is settled or expired.
func testSequencePruneOpen(t *testing.T, s SequenceStore) {
	mustCreateSequence(t, s, monthlySequence("m"))
	moveTo(t, s, "m", time.Date(2026, 1, 31, 23, 59, 30, 0, time.UTC))
	open := reserve(t, s, "m", "shop", 2, 1)
	if _, err := s.Settle(t.Context(), "m", open[1].ID, "shop", sequence.Confirmed); err != nil {
		t.Fatal(err)
	}
	s.ShiftTime(40 * time.Second) // 1 February 00:00:10: January closed, the 2 numbers expire at 00:00:30
	reserve(t, s, "m", "shop", 1)
	for _, dry := range []bool{true, false} {
		if n, err := s.Prune(t.Context(), "m", "2026-02", dry); !errors.Is(err, sequence.ErrOpenReservations) || n != 0 {
			t.Errorf("dry run %v with 2 numbers open: got %d, %v; want ErrOpenReservations", dry, n, err)
		}
	}
	if got := periodsOf(t, s, "m"); got["2026-01"] != 3 || prunedBefore(t, s, "m") != "" {
		t.Errorf("after the refusal: got %v, pruned before %q; want January's 3 rows kept", got, prunedBefore(t, s, "m"))
	}
	s.ShiftTime(30 * time.Second) // past their expiry, with no read of the ledger in between
	if n, err := s.Prune(t.Context(), "m", "2026-02", true); err != nil || n != 3 {
		t.Errorf("dry run once due: got %d, %v; want 3", n, err)
	}
	if n, err := s.Prune(t.Context(), "m", "2026-02", false); err != nil || n != 3 {
		t.Errorf("prune once due: got %d, %v; want 3", n, err)
	}
	if got := periodsOf(t, s, "m"); fmt.Sprint(got) != fmt.Sprint(map[string]int{"2026-02": 1}) || prunedBefore(t, s, "m") != "2026-02" {
		t.Errorf("after the prune: got %v, pruned before %q; want February's row only, pruned before 2026-02", got, prunedBefore(t, s, "m"))
	}
}
