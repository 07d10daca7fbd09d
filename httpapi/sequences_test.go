package httpapi_test

import (
	"encoding/csv"
	"net/http"
	"strings"
	"testing"
	"time"
)

type reservationBody struct {
	ReservationID string    `json:"reservation_id"`
	Sequence      string    `json:"sequence"`
	RequestID     string    `json:"request_id"`
	ReservedAt    time.Time `json:"reserved_at"`
	Period        string    `json:"period"`
	Numbers       []string  `json:"numbers"`
	Formatted     []string  `json:"formatted"`
	State         string    `json:"state"`
	Caller        string    `json:"caller"`
	ExpiresAt     time.Time `json:"expires_at"`
}

type ledgerBody struct {
	Entries []struct {
		Period        string `json:"period"`
		Number        string `json:"number"`
		Formatted     string `json:"formatted"`
		State         string `json:"state"`
		ReservationID string `json:"reservation_id"`
		Caller        string `json:"caller"`
		RequestID     string `json:"request_id"`
		ReservedAt    string `json:"reserved_at"`
		ExpiresAt     string `json:"expires_at"`
		SettledAt     any    `json:"settled_at"`
	} `json:"entries"`
	NextAfter *string `json:"next_after"`
}

// withJSON adds a JSON Content-Type to a credential.
func withJSON(h []string) []string { return append(h, "Content-Type", "application/json") }

func TestSequencesHTTP(t *testing.T) {
	e := newEnv(t, envOptions{token: testToken, tokens: testTokens})
	e.waitReady()
	ids, all := withJSON(bearer(secretIDs)), withJSON(bearer(secretAll))

	rec := e.admin("POST", "/v1/sequences", `{"name":"inv","format":"INV-{yyyy}-{seq:06}","reset":"yearly","time_zone":"Europe/Berlin","ttl_seconds":60}`)
	wantStatus(t, rec, http.StatusCreated)
	if loc := rec.Header().Get("Location"); loc != "/v1/sequences/inv" {
		t.Errorf("Location: got %q", loc)
	}

	// Reserve as ids-caller: 3 numbers, formatted in the store's year.
	rec = e.do("POST", "/v1/sequences/inv/reservations", `{"count":3}`, ids...)
	wantStatus(t, rec, http.StatusCreated)
	var r reservationBody
	decode(t, rec, &r)
	year := r.Period
	if len(year) != 4 || strings.Join(r.Numbers, ",") != "1,2,3" || r.Formatted[2] != "INV-"+year+"-000003" || r.Caller != "ids-caller" || r.State != "reserved" {
		t.Fatalf("reservation: got %+v, want 1..3 in the current year for ids-caller", r)
	}

	// Another caller may neither confirm nor void it.
	for _, op := range []string{"confirm", "void"} {
		rec = e.do("POST", "/v1/sequences/inv/reservations/"+r.ReservationID+"/"+op, "", all...)
		if p := checkProblem(t, rec.Code, rec.Header().Get("Content-Type"), rec.Body.Bytes()); p.Code != "forbidden" {
			t.Errorf("%s by another caller: got %d %s, want 403 forbidden", op, rec.Code, p.Code)
		}
	}
	rec = e.do("POST", "/v1/sequences/inv/reservations/"+r.ReservationID+"/confirm", "", ids...)
	wantStatus(t, rec, http.StatusOK)
	rec = e.do("POST", "/v1/sequences/inv/reservations/"+r.ReservationID+"/void", "", ids...)
	if p := checkProblem(t, rec.Code, rec.Header().Get("Content-Type"), rec.Body.Bytes()); p.Code != "conflict" {
		t.Errorf("void after confirm: got %d %s, want 409 conflict", rec.Code, p.Code)
	}

	// A second reservation, voided, and a third left open.
	rec = e.do("POST", "/v1/sequences/inv/reservations", `{"count":"2"}`, ids...)
	wantStatus(t, rec, http.StatusCreated)
	decode(t, rec, &r)
	wantStatus(t, e.do("POST", "/v1/sequences/inv/reservations/"+r.ReservationID+"/void", "", ids...), http.StatusOK)
	wantStatus(t, e.do("POST", "/v1/sequences/inv/reservations", `{"count":1}`, all...), http.StatusCreated)

	// The ledger, two pages of 4 and 2.
	rec = e.admin("GET", "/v1/sequences/inv/ledger?limit=4", "")
	wantStatus(t, rec, http.StatusOK)
	var page ledgerBody
	decode(t, rec, &page)
	if len(page.Entries) != 4 || page.NextAfter == nil || *page.NextAfter != year+"/4" {
		t.Fatalf("first page: %d rows, next %v; want 4 and %s/4", len(page.Entries), page.NextAfter, year)
	}
	rec = e.admin("GET", "/v1/sequences/inv/ledger?limit=4&after="+*page.NextAfter, "")
	decode(t, rec, &page)
	if len(page.Entries) != 2 || page.NextAfter != nil || page.Entries[0].State != "voided" || page.Entries[1].State != "reserved" || page.Entries[1].Caller != "all-caller" {
		t.Errorf("second page: got %+v, want 5 voided and 6 reserved by all-caller, no next", page)
	}
	rec = e.admin("GET", "/v1/sequences/inv/ledger?state=confirmed", "")
	decode(t, rec, &page)
	if len(page.Entries) != 3 {
		t.Errorf("confirmed: %d rows, want 3", len(page.Entries))
	}

	// The CSV export: a header and one line per number.
	rec = e.admin("GET", "/v1/sequences/inv/ledger.csv", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("CSV: got %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
		t.Errorf("Content-Type: got %q", ct)
	}
	lines, err := csv.NewReader(rec.Body).ReadAll()
	if err != nil || len(lines) != 7 || lines[0][3] != "formatted" || lines[6][3] != "INV-"+year+"-000006" {
		t.Errorf("CSV: got %q, %v; want a header and 6 rows", lines, err)
	}

	// The sequence with its status.
	var got map[string]any
	decode(t, e.admin("GET", "/v1/sequences/inv", ""), &got)
	st, _ := got["status"].(map[string]any)
	if st["period"] != year || st["last_number"] != "6" || st["open_reservations"] != 1.0 || got["format"] != "INV-{yyyy}-{seq:06}" {
		t.Errorf("sequence: got %v, want its format and status %s, last 6, 1 open", got, year)
	}

	// The status page shows it to the admin scope, not to others.
	page1 := e.admin("GET", "/", "").Body.String()
	row := `<tr data-sequence="inv"><td>inv</td><td><code>INV-{yyyy}-{seq:06}</code></td><td>yearly <span class="muted">(Europe/Berlin)</span></td><td>` + year + `</td><td>6</td><td>1</td>`
	if !strings.Contains(page1, row) {
		t.Errorf("status page: no row %s", row)
	}
	if anon := e.do("GET", "/", "").Body.String(); strings.Contains(anon, `data-sequence=`) {
		t.Error("status page without details names the sequences")
	}
}

// TestSequencesHTTPBadInput: each bad request gets a problem and changes
// nothing.
func TestSequencesHTTPBadInput(t *testing.T) {
	e := newEnv(t, envOptions{token: testToken, tokens: testTokens})
	e.waitReady()
	wantStatus(t, e.admin("POST", "/v1/sequences", `{"name":"inv","format":"INV-{seq:04}"}`), http.StatusCreated)
	ids := withJSON(bearer(secretIDs))
	tests := []struct {
		name, method, target, body string
		header                     []string
		status                     int
		detail                     string
	}{
		{"no counter", "POST", "/v1/sequences", `{"name":"a","format":"INV-{yyyy}"}`, withJSON(bearer(testToken)), 400, "no counter field"},
		{"unknown zone", "POST", "/v1/sequences", `{"name":"b","format":"{seq}","time_zone":"Mars/Base"}`, withJSON(bearer(testToken)), 400, "unknown time zone"},
		{"exists", "POST", "/v1/sequences", `{"name":"inv","format":"{seq}"}`, withJSON(bearer(testToken)), 409, "exists already"},
		{"count above the cap", "POST", "/v1/sequences/inv/reservations", `{"count":1001}`, ids, 400, "want 1 to 1000"},
		{"count zero", "POST", "/v1/sequences/inv/reservations", `{"count":0}`, ids, 400, "want 1 to 1000"},
		{"unknown sequence", "POST", "/v1/sequences/nope/reservations", `{"count":1}`, ids, 404, "does not exist"},
		{"unknown reservation", "POST", "/v1/sequences/inv/reservations/zzz/confirm", "", ids, 404, "no such reservation"},
		{"create needs admin", "POST", "/v1/sequences", `{"name":"c","format":"{seq}"}`, ids, 403, ""},
		{"ledger needs admin", "GET", "/v1/sequences/inv/ledger", "", ids, 403, ""},
		{"bad state", "GET", "/v1/sequences/inv/ledger?state=lost", "", bearer(testToken), 400, "unknown state"},
		{"bad after", "GET", "/v1/sequences/inv/ledger?after=x", "", bearer(testToken), 400, "after"},
		{"bad parameter", "GET", "/v1/sequences/inv/ledger?sort=desc", "", bearer(testToken), 400, "unknown parameter"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := e.do(tc.method, tc.target, tc.body, tc.header...)
			p := checkProblem(t, rec.Code, rec.Header().Get("Content-Type"), rec.Body.Bytes())
			if rec.Code != tc.status || !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("got %d %q, want %d with %q", rec.Code, p.Detail, tc.status, tc.detail)
			}
		})
	}
	var list struct {
		Sequences []map[string]any `json:"sequences"`
	}
	decode(t, e.admin("GET", "/v1/sequences", ""), &list)
	if len(list.Sequences) != 1 {
		t.Errorf("sequences after the refusals: %+v, want only inv", list.Sequences)
	}
	var page ledgerBody
	decode(t, e.admin("GET", "/v1/sequences/inv/ledger", ""), &page)
	if len(page.Entries) != 0 {
		t.Errorf("ledger after the refusals: %d rows, want none", len(page.Entries))
	}
}
