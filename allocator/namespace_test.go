package allocator

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// checkResult checks the error of call: when wantBad is not nil, a
// *SettingsError (wrapping ErrInvalidNamespace) with problems in exactly
// those settings; otherwise no error. It reports whether the call
// succeeded and its result is to be checked.
func checkResult(t *testing.T, call string, err error, wantBad []string) bool {
	t.Helper()
	if wantBad == nil {
		if err != nil {
			t.Fatalf("%s: %v", call, err)
		}
		return true
	}
	var se *SettingsError
	if !errors.As(err, &se) || !errors.Is(err, ErrInvalidNamespace) {
		t.Fatalf("%s: got %v (%T), want a *SettingsError wrapping %v", call, err, err, ErrInvalidNamespace)
	}
	var got []string
	for _, p := range se.Problems {
		got = append(got, p.Setting)
	}
	if !slices.Equal(got, wantBad) {
		t.Errorf("%s: got problems with %q (%v), want %q", call, got, err, wantBad)
	}
	return false
}

func TestNamespaceSpec(t *testing.T) {
	const smallest = 1 << 40 // the smallest Snowflake ID of "now"
	i64 := func(v int64) *int64 { return &v }
	mode := func(m Mode) *Mode { return &m }
	fb := func(f Fallback) *Fallback { return &f }
	tests := []struct {
		name    string
		spec    NamespaceSpec
		want    Namespace // Name is filled in
		wantBad []string  // the settings with problems
	}{
		{"defaults", NamespaceSpec{},
			Namespace{MaxID: 0, Step: 1000, MinStep: 1000, MaxStep: 100000, Mode: ModeBuffered, Fallback: FallbackNone}, nil},
		{"everything given", NamespaceSpec{Start: i64(500), Step: i64(10), MinStep: i64(5), MaxStep: i64(20), Mode: mode(ModeStrict), Description: "invoices"},
			Namespace{MaxID: 499, Step: 10, MinStep: 5, MaxStep: 20, Mode: ModeStrict, Fallback: FallbackNone, Description: "invoices"}, nil},
		{"step defaults into min_step", NamespaceSpec{MinStep: i64(5000)},
			Namespace{Step: 5000, MinStep: 5000, MaxStep: 500000, Mode: ModeBuffered, Fallback: FallbackNone}, nil},
		{"step defaults into max_step", NamespaceSpec{MaxStep: i64(10)},
			Namespace{Step: 10, MinStep: 10, MaxStep: 10, Mode: ModeBuffered, Fallback: FallbackNone}, nil},
		{"max_step default capped", NamespaceSpec{Step: i64(20000000)},
			Namespace{Step: 20000000, MinStep: 20000000, MaxStep: MaxStepLimit, Mode: ModeBuffered, Fallback: FallbackNone}, nil},
		{"fallback gets its limit", NamespaceSpec{Start: i64(100), Fallback: fb(FallbackSnowflake)},
			Namespace{MaxID: 99, MaxIDLimit: smallest - 1, Step: 1000, MinStep: 1000, MaxStep: 100000, Mode: ModeBuffered, Fallback: FallbackSnowflake}, nil},
		{"fallback with one ID left", NamespaceSpec{Start: i64(smallest - 1), Fallback: fb(FallbackSnowflake)},
			Namespace{MaxID: smallest - 2, MaxIDLimit: smallest - 1, Step: 1000, MinStep: 1000, MaxStep: 100000, Mode: ModeBuffered, Fallback: FallbackSnowflake}, nil},
		{"stride and offset", NamespaceSpec{Stride: i64(2), Offset: i64(1)},
			Namespace{Step: 1000, MinStep: 1000, MaxStep: 100000, Mode: ModeBuffered, Fallback: FallbackNone, Stride: 2, Offset: 1}, nil},
		{"largest start for the stride", NamespaceSpec{Start: i64((math.MaxInt64 - 3) / 4), Stride: i64(4), Offset: i64(3)},
			Namespace{MaxID: (math.MaxInt64-3)/4 - 1, Step: 1000, MinStep: 1000, MaxStep: 100000, Mode: ModeBuffered, Fallback: FallbackNone, Stride: 4, Offset: 3}, nil},
		// The limit is the last slot whose ID, slot×4+3, lies below the
		// smallest Snowflake ID.
		{"fallback limit with a stride", NamespaceSpec{Start: i64(100), Fallback: fb(FallbackSnowflake), Stride: i64(4), Offset: i64(3)},
			Namespace{MaxID: 99, MaxIDLimit: (smallest - 1 - 3) / 4, Step: 1000, MinStep: 1000, MaxStep: 100000, Mode: ModeBuffered, Fallback: FallbackSnowflake, Stride: 4, Offset: 3}, nil},

		{"bad name", NamespaceSpec{Name: "Bad Name"}, Namespace{}, []string{"name"}},
		{"stride zero", NamespaceSpec{Stride: i64(0)}, Namespace{}, []string{"stride"}},
		{"stride negative", NamespaceSpec{Stride: i64(-2), Offset: i64(1)}, Namespace{}, []string{"stride"}},
		{"stride above the limit", NamespaceSpec{Stride: i64(MaxStride + 1)}, Namespace{}, []string{"stride"}},
		{"offset without a stride", NamespaceSpec{Offset: i64(1)}, Namespace{}, []string{"offset"}},
		{"offset equal to the stride", NamespaceSpec{Stride: i64(2), Offset: i64(2)}, Namespace{}, []string{"offset"}},
		{"offset negative", NamespaceSpec{Stride: i64(2), Offset: i64(-1)}, Namespace{}, []string{"offset"}},
		{"start whose ID overflows", NamespaceSpec{Start: i64((math.MaxInt64-3)/4 + 1), Stride: i64(4), Offset: i64(3)}, Namespace{}, []string{"start"}},
		{"start zero", NamespaceSpec{Start: i64(0)}, Namespace{}, []string{"start"}},
		{"step zero", NamespaceSpec{Step: i64(0)}, Namespace{}, []string{"step"}},
		{"step huge", NamespaceSpec{Step: i64(math.MaxInt64)}, Namespace{}, []string{"step"}},
		{"step above the limit", NamespaceSpec{Step: i64(MaxStepLimit + 1)}, Namespace{}, []string{"step"}},
		{"min_step above step", NamespaceSpec{Step: i64(100), MinStep: i64(5000)}, Namespace{}, []string{"min_step"}},
		{"min_step zero", NamespaceSpec{MinStep: i64(0)}, Namespace{}, []string{"min_step"}},
		{"max_step below step", NamespaceSpec{Step: i64(50), MaxStep: i64(10)}, Namespace{}, []string{"max_step"}},
		{"max_step above the limit", NamespaceSpec{MaxStep: i64(MaxStepLimit + 1)}, Namespace{}, []string{"max_step"}},
		{"min above max, no step", NamespaceSpec{MinStep: i64(500), MaxStep: i64(400)}, Namespace{}, []string{"min_step"}},
		{"unknown mode", NamespaceSpec{Mode: mode("fast")}, Namespace{}, []string{"mode"}},
		{"empty mode", NamespaceSpec{Mode: mode("")}, Namespace{}, []string{"mode"}},
		{"unknown fallback", NamespaceSpec{Fallback: fb("uuid")}, Namespace{}, []string{"fallback"}},
		{"description too long", NamespaceSpec{Description: strings.Repeat("x", MaxDescriptionLen+1)}, Namespace{}, []string{"description"}},
		{"description not UTF-8", NamespaceSpec{Description: "\xff"}, Namespace{}, []string{"description"}},
		{"every problem at once", NamespaceSpec{Name: "-", Start: i64(-1), Step: i64(0), Mode: mode("x"), Fallback: fb("y")},
			Namespace{}, []string{"name", "start", "step", "mode", "fallback"}},
		{"fallback with no ID left", NamespaceSpec{Start: i64(smallest), Fallback: fb(FallbackSnowflake)}, Namespace{}, []string{"fallback"}},
		{"fallback with a counter above the Snowflake IDs", NamespaceSpec{Start: i64(smallest + 5), Fallback: fb(FallbackSnowflake)}, Namespace{}, []string{"fallback"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.spec.Name == "" {
				tt.spec.Name = "orders"
			}
			got, err := tt.spec.Namespace(smallest)
			if !checkResult(t, "Namespace", err, tt.wantBad) {
				return
			}
			if err := tt.spec.Validate(); err != nil {
				t.Errorf("Validate: got %v, want nil", err)
			}
			tt.want.Name = tt.spec.Name
			if tt.want.Stride == 0 {
				tt.want.Stride = 1 // the default, left out of the rows above
			}
			if got != tt.want {
				t.Errorf("Namespace:\ngot  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestNamespaceSpecValidateLeavesOutTheFallbackLimit: Validate judges
// everything but the counter against the Snowflake IDs, which needs them.
func TestNamespaceSpecValidateLeavesOutTheFallbackLimit(t *testing.T) {
	start, fallback := int64(math.MaxInt64), FallbackSnowflake
	spec := NamespaceSpec{Name: "orders", Start: &start, Fallback: &fallback}
	if err := spec.Validate(); err != nil {
		t.Errorf("Validate: got %v, want nil", err)
	}
	for _, smallest := range []int64{0, 1, 1 << 40} {
		if _, err := spec.Namespace(smallest); !errors.Is(err, ErrInvalidNamespace) {
			t.Errorf("Namespace(%d): got %v, want %v", smallest, err, ErrInvalidNamespace)
		}
	}
}

func TestNamespaceUpdateApply(t *testing.T) {
	const smallest = 1 << 40
	cur := Namespace{Name: "orders", MaxID: 5000, Step: 100, MinStep: 10, MaxStep: 1000, Mode: ModeBuffered, Fallback: FallbackNone, Version: 3, Description: "d"}
	withLimit := cur
	withLimit.MaxIDLimit, withLimit.Fallback = 1<<30, FallbackSnowflake
	high := cur
	high.MaxID = smallest - 1
	i64 := func(v int64) *int64 { return &v }
	tests := []struct {
		name      string
		cur       Namespace
		u         NamespaceUpdate
		want      func(*Namespace) // applied to cur
		wantLimit *int64           // the update's MaxIDLimit
		wantBad   []string
	}{
		{"nothing", cur, NamespaceUpdate{}, func(*Namespace) {}, nil, nil},
		{"step within the bounds", cur, NamespaceUpdate{Step: i64(500)}, func(ns *Namespace) { ns.Step = 500 }, nil, nil},
		{"every field", cur, NamespaceUpdate{Step: i64(20), MinStep: i64(20), MaxStep: i64(20), Mode: new(ModeStrict), Description: new("")},
			func(ns *Namespace) {
				ns.Step, ns.MinStep, ns.MaxStep, ns.Mode, ns.Description = 20, 20, 20, ModeStrict, ""
			}, nil, nil},
		{"fallback on gets a limit", cur, NamespaceUpdate{Fallback: new(FallbackSnowflake)},
			func(ns *Namespace) { ns.Fallback, ns.MaxIDLimit = FallbackSnowflake, smallest-1 }, i64(smallest - 1), nil},
		{"fallback on again keeps the limit", withLimit, NamespaceUpdate{Fallback: new(FallbackSnowflake)},
			func(*Namespace) {}, nil, nil},
		{"fallback off keeps the limit", withLimit, NamespaceUpdate{Fallback: new(FallbackNone)},
			func(ns *Namespace) { ns.Fallback = FallbackNone }, nil, nil},

		{"min_step above step", cur, NamespaceUpdate{MinStep: i64(5000)}, nil, nil, []string{"min_step"}},
		{"max_step below step", cur, NamespaceUpdate{MaxStep: i64(10)}, nil, nil, []string{"max_step"}},
		{"step zero", cur, NamespaceUpdate{Step: i64(0)}, nil, nil, []string{"step"}},
		{"steps out of range", cur, NamespaceUpdate{Step: i64(-5), MinStep: i64(-10), MaxStep: i64(MaxStepLimit + 1)}, nil, nil, []string{"step", "min_step", "max_step"}},
		{"unknown mode", cur, NamespaceUpdate{Mode: new(Mode("fast")), Description: new("ignored")}, nil, nil, []string{"mode"}},
		{"unknown fallback", cur, NamespaceUpdate{Fallback: new(Fallback("uuid"))}, nil, nil, []string{"fallback"}},
		{"description too long", cur, NamespaceUpdate{Description: new(strings.Repeat("é", MaxDescriptionLen))}, nil, nil, []string{"description"}},
		{"fallback on with a counter at the Snowflake IDs", high, NamespaceUpdate{Fallback: new(FallbackSnowflake)}, nil, nil, []string{"fallback"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, u, err := tt.u.Apply(tt.cur, smallest)
			if !checkResult(t, "Apply", err, tt.wantBad) {
				return
			}
			want := tt.cur
			tt.want(&want)
			if next != want {
				t.Errorf("Apply:\ngot  %+v\nwant %+v", next, want)
			}
			wantU := tt.u
			wantU.MaxIDLimit = tt.wantLimit
			if fmt.Sprint(deref(u.MaxIDLimit)) != fmt.Sprint(deref(wantU.MaxIDLimit)) || u.Step != tt.u.Step || u.Fallback != tt.u.Fallback {
				t.Errorf("Apply: update %+v (limit %v), want %+v (limit %v)", u, deref(u.MaxIDLimit), wantU, deref(wantU.MaxIDLimit))
			}
		})
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestNamespaceLimit(t *testing.T) {
	tests := []struct {
		ns              Namespace
		limit, left     int64
		exhaustedSuffix string
	}{
		{Namespace{MaxID: 0}, math.MaxInt64, math.MaxInt64, ""},
		{Namespace{MaxID: math.MaxInt64}, math.MaxInt64, 0, "every ID up to its limit 9223372036854775807 has been handed out"},
		{Namespace{MaxID: 10, MaxIDLimit: 25}, 25, 15, "15 IDs left up to its limit 25, 20 asked for"},
		{Namespace{MaxID: 25, MaxIDLimit: 25}, 25, 0, "every ID up to its limit 25 has been handed out"},
	}
	for _, tt := range tests {
		if got := tt.ns.Limit(); got != tt.limit {
			t.Errorf("%+v: Limit() = %d, want %d", tt.ns, got, tt.limit)
		}
		if got := tt.ns.Remaining(); got != tt.left {
			t.Errorf("%+v: Remaining() = %d, want %d", tt.ns, got, tt.left)
		}
		err := tt.ns.ExhaustedError(20)
		if !errors.Is(err, ErrNamespaceExhausted) || !strings.HasSuffix(err.Error(), tt.exhaustedSuffix) {
			t.Errorf("%+v: ExhaustedError(20) = %v, want %v ending %q", tt.ns, err, ErrNamespaceExhausted, tt.exhaustedSuffix)
		}
	}
}

func TestValidFetchAndReturnTail(t *testing.T) {
	for _, n := range []int64{0, -1, math.MinInt64} {
		if err := ValidFetch("orders", n); !errors.Is(err, ErrInvalidNamespace) {
			t.Errorf("ValidFetch(%d): got %v, want %v", n, err, ErrInvalidNamespace)
		}
	}
	if err := ValidFetch("orders", 1); err != nil {
		t.Errorf("ValidFetch(1): got %v, want nil", err)
	}
	if err := ValidReturnTail("orders", 40, 41); !errors.Is(err, ErrInvalidNamespace) {
		t.Errorf("ValidReturnTail(40 to 41): got %v, want %v", err, ErrInvalidNamespace)
	}
	if err := ValidReturnTail("orders", 40, 40); err != nil {
		t.Errorf("ValidReturnTail(40 to 40): got %v, want nil", err)
	}
}

// ExampleNamespaceSpec_Namespace resolves a spec with the Snowflake
// fallback: the namespace's counter stops one below the smallest Snowflake
// ID of now.
func ExampleNamespaceSpec_Namespace() {
	start, fallback := int64(1000), FallbackSnowflake
	spec := NamespaceSpec{Name: "orders", Start: &start, Fallback: &fallback}
	ns, err := spec.Namespace(1 << 40) // e.g. SnowflakeSource.SmallestIDNow()
	fmt.Println(ns.MaxID+1, ns.MaxIDLimit, ns.Step, ns.MinStep, ns.MaxStep, ns.Mode, err)

	step := int64(0)
	_, err = NamespaceSpec{Name: "orders", Step: &step}.Namespace(0)
	fmt.Println(err)
	// Output:
	// 1000 1099511627775 1000 1000 100000 buffered <nil>
	// invalid namespace: step 0: want 1 to 1073741824
}

func TestNamespaceRevive(t *testing.T) {
	tomb := Namespace{Name: "orders", MaxID: 500, MaxIDLimit: 10000, Version: 7, Fallback: FallbackNone}
	spec, err := NamespaceSpec{Name: "orders", Start: new(int64(501))}.Namespace(1 << 40)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		tomb      Namespace
		maxID     int64 // the new namespace's, start - 1
		limit     int64
		wantLimit int64
		wantErr   string // "" for success
	}{
		{"right above the old max_id", tomb, 500, 0, 10000, ""},
		{"far above", tomb, 9000, 0, 10000, ""},
		{"at the old limit", tomb, 10000, 0, 10000, ""},
		{"a lower limit asked for", tomb, 600, 2000, 2000, ""},
		{"a higher limit asked for", tomb, 600, 20000, 10000, ""},
		{"no old limit", Namespace{Name: "orders", MaxID: 500, Version: 7}, 600, 0, 0, ""},
		{"no old limit, a new one", Namespace{Name: "orders", MaxID: 500, Version: 7}, 600, 3000, 3000, ""},
		{"at the old max_id", tomb, 499, 0, 0, `namespace "orders" was deleted at max_id 500; create it with a start above 500`},
		{"at 1", tomb, 0, 0, 0, "start above 500"},
		{"above the old limit", tomb, 10001, 0, 0, "keeps; create it with a start from 501 to 10000"},
		{"above a lower new limit", tomb, 2500, 2000, 0, "max_id_limit 2000"},
	}
	for _, tt := range tests {
		ns := spec
		ns.MaxID, ns.MaxIDLimit = tt.maxID, tt.limit
		got, err := tt.tomb.Revive(ns)
		if tt.wantErr != "" {
			if !errors.Is(err, ErrInvalidNamespace) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: got %+v, %v; want %v saying %q", tt.name, got, err, ErrInvalidNamespace, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		want := ns
		want.MaxIDLimit, want.Version = tt.wantLimit, 8
		if got != want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, want)
		}
	}
}
