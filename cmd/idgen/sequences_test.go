package main

import (
	"context"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator/sequence"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/testserver"
)

// TestSequencesCLI creates a sequence, reserves numbers through the store
// as a node would, and reads, exports and voids them with the CLI; bad
// command lines exit 2 and change nothing.
func TestSequencesCLI(t *testing.T) {
	dsn := testserver.StoreDSN(t, "sqlite")
	mustCLI(t, "migrate", "up", "--dsn", dsn)

	bad := []struct {
		args []string
		want string
	}{
		{[]string{"sequences", "create", "inv", "--format", "INV-{yyyy}"}, "no counter field"},
		{[]string{"sequences", "create", "inv", "--format", "{seq}", "--time-zone", "Mars/Base"}, "unknown time zone"},
		{[]string{"sequences", "create", "inv"}, "missing --format"},
		{[]string{"sequences", "ledger", "inv", "--state", "lost"}, "invalid --state"},
		{[]string{"sequences", "ledger", "inv", "--limit", "0"}, "invalid --limit"},
		{[]string{"sequences", "void", "inv", "r1"}, "missing --caller"},
		{[]string{"sequences", "frobnicate"}, "unknown sequences command"},
	}
	for _, tc := range bad {
		r := cli(t, nil, append(tc.args, "--dsn", dsn)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("idgen %q: got exit %d, stderr %q; want 2 with %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if out := mustCLI(t, "sequences", "list", "--dsn", dsn); len(lines(out)) != 1 {
		t.Fatalf("after the refusals: got %q, want only the header", out)
	}

	out := mustCLI(t, "sequences", "create", "inv", "--format", "INV-{yyyy}-{seq:06}", "--reset", "yearly",
		"--time-zone", "Europe/Berlin", "--start", "100", "--ttl", "1m", "--dsn", dsn)
	if !strings.HasPrefix(out, "created sequence inv: format INV-{yyyy}-{seq:06}, reset yearly in Europe/Berlin, first number 100") {
		t.Errorf("create: got %q", out)
	}

	store, err := stores.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	seqs := store.(interface{ Sequences() sequence.Store }).Sequences()
	rs, err := seqs.Reserve(t.Context(), "inv", []sequence.Request{{ID: "r1", Count: 2, Caller: "shop"}, {ID: "r2", Count: 1, Caller: "shop"}})
	if err != nil {
		t.Fatal(err)
	}

	if out := mustCLI(t, "sequences", "list", "--dsn", dsn); !strings.Contains(lines(out)[1], "102") || !strings.Contains(lines(out)[1], "3") {
		t.Errorf("list: got %q, want inv with last number 102 and 3 open", out)
	}

	r := cli(t, nil, "sequences", "void", "inv", "r1", "--caller", "mallory", "--dsn", dsn)
	if r.code != 1 || !strings.Contains(r.stderr, "another caller") {
		t.Errorf("void for another caller: got exit %d, stderr %q; want 1 and a refusal", r.code, r.stderr)
	}
	r = cli(t, nil, "sequences", "void", "inv", "r1", "--caller", "shop", "--dsn", dsn)
	if r.code != 0 || !strings.Contains(r.stdout, "voided reservation r1 of sequence inv: 2 numbers of period "+rs[0].Period) ||
		!strings.Contains(r.stderr, `msg="reservation voided"`) {
		t.Errorf("void: got exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	out = mustCLI(t, "sequences", "ledger", "inv", "--limit", "2", "--dsn", dsn)
	ls := lines(out)
	if len(ls) != 4 || !strings.Contains(ls[1], "voided") || !strings.Contains(ls[3], "--after "+rs[0].Period+"/101") {
		t.Errorf("ledger page: got %q", out)
	}
	out = mustCLI(t, "sequences", "ledger", "inv", "--after", rs[0].Period+"/101", "--dsn", dsn)
	if ls := lines(out); len(ls) != 2 || !strings.Contains(ls[1], "reserved") {
		t.Errorf("ledger next page: got %q", out)
	}

	out = mustCLI(t, "sequences", "export", "inv", "--state", "voided", "--dsn", dsn)
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) != 3 || rows[1][3] != rs[0].Formatted[0] || rows[2][4] != "voided" {
		t.Errorf("export: got %q, %v; want a header and the 2 voided numbers", rows, err)
	}
}

// TestSequencesPruneCLI prunes the ledger of a closed month: the refusals
// exit 2 and delete nothing, a dry run counts, the prune deletes, and
// list, ledger and export say the period is pruned.
func TestSequencesPruneCLI(t *testing.T) {
	dsn := testserver.StoreDSN(t, "sqlite")
	mustCLI(t, "migrate", "up", "--dsn", dsn)
	mustCLI(t, "sequences", "create", "m", "--format", "M{yyyyMM}-{seq:04}", "--reset", "monthly", "--ttl", "1m", "--dsn", dsn)
	mustCLI(t, "sequences", "create", "flat", "--format", "F{seq:04}", "--dsn", dsn)

	store, err := stores.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	seqs := store.(interface{ Sequences() sequence.Store }).Sequences()
	shift := store.(sequence.TimeShifter)
	// Two numbers two months back (their reservation long expired), one
	// now: the CLI reads the database's own time.
	shift.ShiftTime(-62 * 24 * time.Hour)
	old, err := seqs.Reserve(t.Context(), "m", []sequence.Request{{ID: "old", Count: 2, Caller: "shop"}})
	if err != nil {
		t.Fatal(err)
	}
	shift.ShiftTime(62 * 24 * time.Hour)
	cur, err := seqs.Reserve(t.Context(), "m", []sequence.Request{{ID: "cur", Count: 1, Caller: "shop"}})
	if err != nil {
		t.Fatal(err)
	}
	past, current := old[0].Period, cur[0].Period
	month, err := time.Parse("2006-01", current)
	if err != nil {
		t.Fatal(err)
	}
	next := month.AddDate(0, 1, 0).Format("2006-01")

	bad := []struct {
		args []string
		want string
	}{
		{[]string{"m"}, "missing --before"},
		{[]string{"nope", "--before", current}, "sequence not found"},
		{[]string{"flat", "--before", "2026"}, "never resets"},
		{[]string{"m", "--before", month.Format("2006")}, "periods are written like 2026-11"},
		{[]string{"m", "--before", next}, "later than the current period " + current},
		{[]string{"m", "--before", next, "--dry-run"}, "later than the current period " + current},
	}
	for _, tc := range bad {
		r := cli(t, nil, append(append([]string{"sequences", "prune"}, tc.args...), "--dsn", dsn)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "nothing deleted") && tc.want != "missing --before" {
			t.Errorf("idgen sequences prune %q: got exit %d, stderr %q; want 2 with %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if out := mustCLI(t, "sequences", "ledger", "m", "--dsn", dsn); len(lines(out)) != 4 {
		t.Fatalf("after the refusals: got %q, want the 3 numbers", out)
	}

	if out := mustCLI(t, "sequences", "prune", "m", "--before", current, "--dry-run", "--dsn", dsn); out != "would prune 2 ledger rows of sequence m: periods before "+current+" (dry run: nothing deleted)\n" {
		t.Errorf("dry run: got %q", out)
	}
	r := cli(t, nil, "sequences", "prune", "m", "--before", current, "--dsn", dsn)
	if r.code != 0 || r.stdout != "pruned 2 ledger rows of sequence m: periods before "+current+"\n" || !strings.Contains(r.stderr, `msg="sequence ledger pruned"`) {
		t.Errorf("prune: got exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	out := mustCLI(t, "sequences", "list", "--dsn", dsn)
	if ls := lines(out); len(ls) != 3 || !strings.Contains(ls[0], "PRUNED") || !strings.Contains(ls[2], "before "+current) {
		t.Errorf("list: got %q, want m pruned before %s", out, current)
	}
	if out := mustCLI(t, "sequences", "ledger", "m", "--period", past, "--dsn", dsn); !strings.Contains(out, "period "+past+" of sequence m is pruned") {
		t.Errorf("ledger of the pruned period: got %q", out)
	}
	if out := mustCLI(t, "sequences", "ledger", "m", "--dsn", dsn); len(lines(out)) != 2 || !strings.Contains(out, current) {
		t.Errorf("ledger after the prune: got %q, want the current number only", out)
	}
	r = cli(t, nil, "sequences", "export", "m", "--period", past, "--dsn", dsn)
	if r.code != 1 || !strings.Contains(r.stderr, "period "+past+" is pruned") {
		t.Errorf("export of the pruned period: got exit %d, stderr %q", r.code, r.stderr)
	}
}
