package peerimport_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/peerimport"
)

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name      string
		src       peerimport.Source
		row       peerimport.Row
		o         peerimport.Options
		wantStart int64
		wantStep  int64
		wantErr   string // in the error; "" for none
		wantNote  string // in the notes
	}{
		{"leaf row", peerimport.Leaf, peerimport.Row{Name: "orders", MaxID: 5001, Step: 1000, Delta: 1}, peerimport.Options{}, 5002, 1000, "", ""},
		{"with a gap", peerimport.Leaf, peerimport.Row{Name: "orders", MaxID: 5001, Step: 1000, Delta: 1}, peerimport.Options{Gap: 100000}, 105002, 1000, "", ""},
		{"fresh row", peerimport.Tinyid, peerimport.Row{Name: "t", MaxID: 0, Step: 10, Delta: 1}, peerimport.Options{}, 1, 10, "", ""},
		{"NULL step", peerimport.Tinyid, peerimport.Row{Name: "t", MaxID: 7, Delta: 1}, peerimport.Options{}, 8, allocator.DefaultStep, "", "default"},
		{"huge step", peerimport.Leaf, peerimport.Row{Name: "t", MaxID: 7, Step: math.MaxInt32 * 2, Delta: 1}, peerimport.Options{}, 8, allocator.MaxStepLimit, "", "limit"},
		{"delta refused", peerimport.Tinyid, peerimport.Row{Name: "odd", MaxID: 9, Step: 10, Delta: 2, Remainder: 1}, peerimport.Options{}, 0, 0, `biz_type "odd": delta 2`, ""},
		{"delta accepted", peerimport.Tinyid, peerimport.Row{Name: "odd", MaxID: 9, Step: 10, Delta: 2, Remainder: 1}, peerimport.Options{AcceptDelta: true}, 10, 10, "", "1 mod 2"},
		{"bad delta", peerimport.Tinyid, peerimport.Row{Name: "t", MaxID: 9, Step: 10, Delta: 0}, peerimport.Options{}, 0, 0, "delta 0", ""},
		{"bad name", peerimport.Leaf, peerimport.Row{Name: "Orders", MaxID: 1, Step: 1, Delta: 1}, peerimport.Options{}, 0, 0, `biz_tag "Orders": not an idgen namespace name`, ""},
		{"negative max_id", peerimport.Leaf, peerimport.Row{Name: "o", MaxID: -1, Step: 1, Delta: 1}, peerimport.Options{}, 0, 0, "negative", ""},
		{"no room above", peerimport.Leaf, peerimport.Row{Name: "o", MaxID: math.MaxInt64, Step: 1, Delta: 1}, peerimport.Options{}, 0, 0, "leaves no ID above it", ""},
		{"no room with the gap", peerimport.Leaf, peerimport.Row{Name: "o", MaxID: math.MaxInt64 - 10, Step: 1, Delta: 1}, peerimport.Options{Gap: 10}, 0, 0, "leaves no ID above it", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items, err := peerimport.Plan(tc.src, []peerimport.Row{tc.row}, tc.o)
			if tc.wantErr != "" {
				if !errors.Is(err, peerimport.ErrUnusableRows) || !strings.Contains(err.Error(), tc.wantErr) || items != nil {
					t.Fatalf("got %v, %v; want no items and an error with %q", items, err, tc.wantErr)
				}
				return
			}
			if err != nil || len(items) != 1 {
				t.Fatalf("got %v, %v; want one item", items, err)
			}
			it := items[0]
			if it.Start() != tc.wantStart || *it.Spec.Step != tc.wantStep || it.Spec.Name != tc.row.Name {
				t.Errorf("got start %d step %d name %q, want %d %d %q", it.Start(), *it.Spec.Step, it.Spec.Name, tc.wantStart, tc.wantStep, tc.row.Name)
			}
			if notes := strings.Join(it.Notes, "; "); !strings.Contains(notes, tc.wantNote) || (tc.wantNote == "" && notes != "") {
				t.Errorf("notes: got %q, want %q in them", notes, tc.wantNote)
			}
		})
	}
}

func TestPlanListsEveryProblem(t *testing.T) {
	rows := []peerimport.Row{
		{Name: "ok", MaxID: 1, Step: 1, Delta: 1},
		{Name: "Bad", MaxID: 1, Step: 1, Delta: 1},
		{Name: "ok", MaxID: 2, Step: 1, Delta: 1},
		{Name: "neg", MaxID: -5, Step: 1, Delta: 1},
	}
	_, err := peerimport.Plan(peerimport.Leaf, rows, peerimport.Options{})
	for _, want := range []string{`"Bad"`, `"ok": listed twice`, `"neg": max_id -5`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q in it", err, want)
		}
	}
}

func TestParseSource(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  peerimport.Source
		table string
	}{{"leaf", peerimport.Leaf, "leaf_alloc"}, {"tinyid", peerimport.Tinyid, "tiny_id_info"}} {
		got, err := peerimport.ParseSource(tc.in)
		if err != nil || got != tc.want || got.DefaultTable() != tc.table {
			t.Errorf("ParseSource(%q): got %q %v (table %q), want %q (table %q)", tc.in, got, err, got.DefaultTable(), tc.want, tc.table)
		}
	}
	if _, err := peerimport.ParseSource("uid-generator"); !errors.Is(err, peerimport.ErrUnknownSource) {
		t.Errorf("ParseSource(uid-generator): got %v, want ErrUnknownSource", err)
	}
}
