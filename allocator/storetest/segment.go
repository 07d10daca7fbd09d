package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

// sampleNamespace is a namespace unlike the defaults, to catch a lost field.
func sampleNamespace(name string) allocator.Namespace {
	return allocator.Namespace{
		Name:        name,
		MaxID:       41,
		MaxIDLimit:  1 << 50,
		Step:        100,
		MinStep:     10,
		MaxStep:     10000,
		Mode:        allocator.ModeStrict,
		Fallback:    allocator.FallbackSnowflake,
		Description: `Invoice numbers — "EU" shop's; 100% ünïcode`,
	}
}

func mustCreate(t *testing.T, s allocator.Store, ns allocator.Namespace) allocator.Namespace {
	t.Helper()
	got, err := s.CreateNamespace(t.Context(), ns)
	if err != nil {
		t.Fatalf("CreateNamespace(%q): %v", ns.Name, err)
	}
	return got
}

// createFresh creates sampleNamespace(name) at max_id 0.
func createFresh(t *testing.T, s allocator.Store, name string) allocator.Namespace {
	t.Helper()
	ns := sampleNamespace(name)
	ns.MaxID = 0
	mustCreate(t, s, ns)
	return ns
}

func mustGet(t *testing.T, s allocator.Store, name string) allocator.Namespace {
	t.Helper()
	got, err := s.GetNamespace(t.Context(), name)
	if err != nil {
		t.Fatalf("GetNamespace(%q): %v", name, err)
	}
	return got
}

func mustFetch(t *testing.T, s allocator.Store, name string, n int64) allocator.Segment {
	t.Helper()
	seg, err := s.FetchSegment(t.Context(), name, n)
	if err != nil {
		t.Fatalf("FetchSegment(%q, %d): %v", name, n, err)
	}
	return seg
}

// settingsDiff lists the non-time fields where got differs from want.
func settingsDiff(got, want allocator.Namespace) string {
	var d []string
	add := func(field string, g, w any) {
		if g != w {
			d = append(d, fmt.Sprintf("%s: got %v, want %v", field, g, w))
		}
	}
	add("Name", got.Name, want.Name)
	add("MaxID", got.MaxID, want.MaxID)
	add("MaxIDLimit", got.MaxIDLimit, want.MaxIDLimit)
	add("Step", got.Step, want.Step)
	add("MinStep", got.MinStep, want.MinStep)
	add("MaxStep", got.MaxStep, want.MaxStep)
	add("Mode", got.Mode, want.Mode)
	add("Fallback", got.Fallback, want.Fallback)
	add("Version", got.Version, want.Version)
	add("Description", got.Description, want.Description)
	gk, gr := got.Interleave()
	wk, wr := want.Interleave()
	add("Stride", gk, wk)
	add("Offset", gr, wr)
	return strings.Join(d, "; ")
}

// namespaceDiff is settingsDiff that also compares the times.
func namespaceDiff(got, want allocator.Namespace) string {
	d := settingsDiff(got, want)
	for _, c := range []struct {
		field     string
		got, want time.Time
	}{
		{"CreatedAt", got.CreatedAt, want.CreatedAt},
		{"UpdatedAt", got.UpdatedAt, want.UpdatedAt},
	} {
		if !c.got.Equal(c.want) {
			if d != "" {
				d += "; "
			}
			d += fmt.Sprintf("%s: got %v, want %v", c.field, c.got, c.want)
		}
	}
	return d
}

func testNamespaceRoundTrip(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	// Byte order differs from locale collation here; stores must use bytes.
	names := []string{"ab", "a_c", "a.b", "a0", "a-b", "orders.eu-1"}
	in := sampleNamespace("")
	// The store owns version and the times: what the caller puts there is ignored.
	in.Version = 99
	in.CreatedAt = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	in.UpdatedAt = in.CreatedAt

	created := make(map[string]allocator.Namespace)
	for i, name := range names {
		ns := in
		ns.Name = name
		ns.MaxID = int64(1000 * i)
		got := mustCreate(t, s, ns)
		want := ns
		want.Version = 0
		if d := settingsDiff(got, want); d != "" {
			t.Errorf("CreateNamespace(%q) returned %s", name, d)
		}
		if got.CreatedAt.IsZero() || !got.UpdatedAt.Equal(got.CreatedAt) {
			t.Errorf("CreateNamespace(%q): CreatedAt %v, UpdatedAt %v; want equal database times", name, got.CreatedAt, got.UpdatedAt)
		}
		if got.CreatedAt.Location() != time.UTC {
			t.Errorf("CreateNamespace(%q): CreatedAt in %v, want UTC", name, got.CreatedAt.Location())
		}
		// Within an hour, else a zone was mishandled.
		if off := time.Since(got.CreatedAt).Abs(); off > time.Hour {
			t.Errorf("CreateNamespace(%q): CreatedAt %v is %v away from now, want database time", name, got.CreatedAt, off)
		}
		created[name] = got

		if d := namespaceDiff(mustGet(t, s, name), got); d != "" {
			t.Errorf("GetNamespace(%q) after create: %s", name, d)
		}
	}

	list, err := s.ListNamespaces(ctx)
	if err != nil {
		t.Fatalf("ListNamespaces: %v", err)
	}
	wantOrder := slices.Clone(names)
	slices.Sort(wantOrder) // byte order
	var gotOrder []string
	for _, ns := range list {
		gotOrder = append(gotOrder, ns.Name)
		if d := namespaceDiff(ns, created[ns.Name]); d != "" {
			t.Errorf("ListNamespaces entry %q: %s", ns.Name, d)
		}
	}
	if !slices.Equal(gotOrder, wantOrder) {
		t.Errorf("ListNamespaces names: got %q, want %q", gotOrder, wantOrder)
	}
}

func testUpdateNamespace(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	mustCreate(t, s, sampleNamespace("orders"))
	before := mustFetch(t, s, "orders", 7).Namespace // max_id 48, version 1

	step, minStep, maxStep := int64(200), int64(20), int64(2000)
	mode, fallback, desc := allocator.ModeBuffered, allocator.FallbackNone, ""
	tests := []struct {
		name   string
		update allocator.NamespaceUpdate
		apply  func(*allocator.Namespace)
	}{
		{
			name:   "nothing",
			update: allocator.NamespaceUpdate{},
			apply:  func(*allocator.Namespace) {},
		},
		{
			name:   "description only",
			update: allocator.NamespaceUpdate{Description: new("changed")},
			apply:  func(ns *allocator.Namespace) { ns.Description = "changed" },
		},
		{
			name:   "step only",
			update: allocator.NamespaceUpdate{Step: new(int64(500))},
			apply:  func(ns *allocator.Namespace) { ns.Step = 500 },
		},
		{
			name: "every field",
			update: allocator.NamespaceUpdate{
				Step: &step, MinStep: &minStep, MaxStep: &maxStep,
				Mode: &mode, Fallback: &fallback, Description: &desc,
			},
			apply: func(ns *allocator.Namespace) {
				ns.Step, ns.MinStep, ns.MaxStep = step, minStep, maxStep
				ns.Mode, ns.Fallback, ns.Description = mode, fallback, desc
			},
		},
	}
	want := before
	for _, tt := range tests {
		got, err := s.UpdateNamespace(ctx, "orders", tt.update)
		if err != nil {
			t.Fatalf("%s: UpdateNamespace: %v", tt.name, err)
		}
		// Settings change; max_id and version (the fetch state) do not.
		tt.apply(&want)
		if d := settingsDiff(got, want); d != "" {
			t.Errorf("%s: UpdateNamespace returned %s", tt.name, d)
		}
		if !got.CreatedAt.Equal(before.CreatedAt) {
			t.Errorf("%s: CreatedAt: got %v, want %v (unchanged)", tt.name, got.CreatedAt, before.CreatedAt)
		}
		if got.UpdatedAt.Before(want.UpdatedAt) {
			t.Errorf("%s: UpdatedAt went back: got %v, before %v", tt.name, got.UpdatedAt, want.UpdatedAt)
		}
		if d := namespaceDiff(mustGet(t, s, "orders"), got); d != "" {
			t.Errorf("%s: GetNamespace after update: %s", tt.name, d)
		}
		want = got
	}
}

func testUpdateBumpsUpdatedAt(t *testing.T, s allocator.Store) {
	created := mustCreate(t, s, sampleNamespace("orders"))
	// Update until the database clock has moved past creation.
	for try := range 50 {
		time.Sleep(2 * time.Millisecond)
		got, err := s.UpdateNamespace(t.Context(), "orders", allocator.NamespaceUpdate{Description: new(fmt.Sprint("try ", try))})
		if err != nil {
			t.Fatalf("UpdateNamespace: %v", err)
		}
		if got.UpdatedAt.Before(created.UpdatedAt) {
			t.Fatalf("UpdatedAt went back: got %v, created %v", got.UpdatedAt, created.UpdatedAt)
		}
		if got.UpdatedAt.After(created.UpdatedAt) {
			if !got.CreatedAt.Equal(created.CreatedAt) {
				t.Errorf("CreatedAt: got %v, want %v (unchanged)", got.CreatedAt, created.CreatedAt)
			}
			return
		}
	}
	t.Errorf("UpdatedAt stayed at %v through 50 updates", created.UpdatedAt)
}

func testInvalidUpdateNamespace(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	before := mustCreate(t, s, sampleNamespace("orders")) // steps 10 <= 100 <= 10000
	tests := []struct {
		name   string
		update allocator.NamespaceUpdate
	}{
		{"min_step above max_step", allocator.NamespaceUpdate{MinStep: new(int64(20000))}},
		{"min_step above max_step, step between", allocator.NamespaceUpdate{MinStep: new(int64(500)), MaxStep: new(int64(400)), Step: new(int64(450))}},
		{"step above max_step", allocator.NamespaceUpdate{Step: new(int64(10001))}},
		{"step below min_step", allocator.NamespaceUpdate{Step: new(int64(9))}},
		{"min_step zero", allocator.NamespaceUpdate{MinStep: new(int64(0))}},
		{"negative steps", allocator.NamespaceUpdate{Step: new(int64(-5)), MinStep: new(int64(-10)), MaxStep: new(int64(-1))}},
		{"unknown mode", allocator.NamespaceUpdate{Mode: new(allocator.Mode("fast")), Description: new("ignored")}},
		{"unknown fallback", allocator.NamespaceUpdate{Fallback: new(allocator.Fallback("uuid"))}},
	}
	for _, tt := range tests {
		_, err := s.UpdateNamespace(ctx, "orders", tt.update)
		if !errors.Is(err, allocator.ErrInvalidNamespace) {
			t.Errorf("%s: UpdateNamespace error: got %v, want %v", tt.name, err, allocator.ErrInvalidNamespace)
		}
		if d := namespaceDiff(mustGet(t, s, "orders"), before); d != "" {
			t.Errorf("%s: row changed by a refused update: %s", tt.name, d)
		}
	}
}

func testDuplicateNamespace(t *testing.T, s allocator.Store) {
	first := mustCreate(t, s, sampleNamespace("orders"))
	second := sampleNamespace("orders")
	second.MaxID, second.Step, second.Description = 7, 50, "second"
	_, err := s.CreateNamespace(t.Context(), second)
	if !errors.Is(err, allocator.ErrNamespaceExists) {
		t.Errorf("second CreateNamespace error: got %v, want %v", err, allocator.ErrNamespaceExists)
	}
	if d := namespaceDiff(mustGet(t, s, "orders"), first); d != "" {
		t.Errorf("row changed by a refused create: %s", d)
	}
}

func testInvalidNamespace(t *testing.T, s allocator.Store) {
	tests := []struct {
		name   string
		change func(*allocator.Namespace)
	}{
		{"min_step zero", func(ns *allocator.Namespace) { ns.MinStep = 0 }},
		{"min_step above step", func(ns *allocator.Namespace) { ns.MinStep = 101 }},
		{"step above max_step", func(ns *allocator.Namespace) { ns.MaxStep = 99 }},
		{"negative max_id", func(ns *allocator.Namespace) { ns.MaxID = -1 }},
		{"empty mode", func(ns *allocator.Namespace) { ns.Mode = "" }},
		{"unknown mode", func(ns *allocator.Namespace) { ns.Mode = "fast" }},
		{"unknown fallback", func(ns *allocator.Namespace) { ns.Fallback = "uuid" }},
		{"name longer than 64", func(ns *allocator.Namespace) { ns.Name = strings.Repeat("n", 65) }},
		{"negative stride", func(ns *allocator.Namespace) { ns.Stride = -2 }},
		{"offset without a stride", func(ns *allocator.Namespace) { ns.Offset = 1 }},
		{"offset equal to the stride", func(ns *allocator.Namespace) { ns.Stride, ns.Offset = 3, 3 }},
		{"negative offset", func(ns *allocator.Namespace) { ns.Stride, ns.Offset = 3, -1 }},
	}
	for i, tt := range tests {
		ns := sampleNamespace(fmt.Sprintf("bad%d", i))
		tt.change(&ns)
		_, err := s.CreateNamespace(t.Context(), ns)
		if !errors.Is(err, allocator.ErrInvalidNamespace) {
			t.Errorf("%s: CreateNamespace error: got %v, want %v", tt.name, err, allocator.ErrInvalidNamespace)
		}
		if _, err := s.GetNamespace(t.Context(), ns.Name); !errors.Is(err, allocator.ErrNamespaceNotFound) {
			t.Errorf("%s: GetNamespace after a refused create: got %v, want %v", tt.name, err, allocator.ErrNamespaceNotFound)
		}
	}
	list, err := s.ListNamespaces(t.Context())
	if err != nil {
		t.Fatalf("ListNamespaces: %v", err)
	}
	if len(list) != 0 {
		t.Errorf("ListNamespaces after refused creates: got %d namespaces, want 0", len(list))
	}
	// A 64-character name is the longest allowed, and is stored whole.
	long := sampleNamespace(strings.Repeat("n", 64))
	if got := mustCreate(t, s, long); got.Name != long.Name {
		t.Errorf("64-character name: got %q, want %q", got.Name, long.Name)
	}
}

func testUnknownNamespace(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	mustCreate(t, s, sampleNamespace("orders"))
	tests := []struct {
		name string
		call func(name string) error
	}{
		{"GetNamespace", func(name string) error {
			_, err := s.GetNamespace(ctx, name)
			return err
		}},
		{"UpdateNamespace", func(name string) error {
			_, err := s.UpdateNamespace(ctx, name, allocator.NamespaceUpdate{Description: new("x")})
			return err
		}},
		{"UpdateNamespace with no change", func(name string) error {
			_, err := s.UpdateNamespace(ctx, name, allocator.NamespaceUpdate{})
			return err
		}},
		{"FetchSegment", func(name string) error {
			_, err := s.FetchSegment(ctx, name, 10)
			return err
		}},
	}
	// "Orders" differs from an existing name only in case.
	for _, name := range []string{"missing", "Orders"} {
		for _, tt := range tests {
			if err := tt.call(name); !errors.Is(err, allocator.ErrNamespaceNotFound) {
				t.Errorf("%s(%q): got %v, want %v", tt.name, name, err, allocator.ErrNamespaceNotFound)
			}
		}
		ok, err := s.ReturnTail(ctx, name, 41, 0, 41)
		if ok || err != nil {
			t.Errorf("ReturnTail(%q): got %v, %v; want false, nil", name, ok, err)
		}
	}
	if d := settingsDiff(mustGet(t, s, "orders"), sampleNamespace("orders")); d != "" {
		t.Errorf("existing namespace changed: %s", d)
	}
}

func testConsecutiveFetches(t *testing.T, s allocator.Store) {
	ns := sampleNamespace("orders")
	ns.MaxID = 999 // the first ID handed out is 1000
	created := mustCreate(t, s, ns)

	wantFirst := int64(1000)
	for i, n := range []int64{10, 1, 100, 7, 10000, 1} {
		seg := mustFetch(t, s, "orders", n)
		wantLast := wantFirst + n - 1
		if seg.First != wantFirst || seg.Last != wantLast {
			t.Errorf("fetch %d of %d: got [%d, %d], want [%d, %d]", i, n, seg.First, seg.Last, wantFirst, wantLast)
		}
		want := created
		want.MaxID, want.Version = wantLast, int64(i+1)
		if d := settingsDiff(seg.Namespace, want); d != "" {
			t.Errorf("fetch %d: namespace after fetch: %s", i, d)
		}
		if !seg.Namespace.CreatedAt.Equal(created.CreatedAt) || seg.Namespace.UpdatedAt.Before(created.UpdatedAt) {
			t.Errorf("fetch %d: times: got created %v updated %v, want created %v and updated not before it",
				i, seg.Namespace.CreatedAt, seg.Namespace.UpdatedAt, created.CreatedAt)
		}
		if d := namespaceDiff(mustGet(t, s, "orders"), seg.Namespace); d != "" {
			t.Errorf("fetch %d: GetNamespace after fetch: %s", i, d)
		}
		wantFirst = wantLast + 1
	}
}

// mustRefuseFetches wants every fetch refused with want, the row unchanged.
func mustRefuseFetches(t *testing.T, s allocator.Store, name string, before allocator.Namespace, want error, counts ...int64) {
	t.Helper()
	for _, n := range counts {
		seg, err := s.FetchSegment(t.Context(), name, n)
		if !errors.Is(err, want) || seg != (allocator.Segment{}) {
			t.Errorf("FetchSegment(%d): got %+v, %v; want no range and %v", n, seg, err, want)
		}
		if d := namespaceDiff(mustGet(t, s, name), before); d != "" {
			t.Errorf("row changed by a refused FetchSegment(%d): %s", n, d)
		}
	}
}

func testFetchInvalidCount(t *testing.T, s allocator.Store) {
	before := mustCreate(t, s, sampleNamespace("orders"))
	mustRefuseFetches(t, s, "orders", before, allocator.ErrInvalidNamespace, 0, -1, math.MinInt64)
}

func testFetchOverflow(t *testing.T, s allocator.Store) {
	ns := sampleNamespace("orders")
	ns.MaxID = math.MaxInt64 - 10
	ns.MaxIDLimit, ns.Fallback = 0, allocator.FallbackNone // no limit but the largest int64
	before := mustCreate(t, s, ns)
	// Past the largest int64: refused, never shortened.
	mustRefuseFetches(t, s, "orders", before, allocator.ErrNamespaceExhausted, 11, math.MaxInt64)

	// The last ten IDs can still be had, exactly.
	seg := mustFetch(t, s, "orders", 10)
	if seg.First != math.MaxInt64-9 || seg.Last != math.MaxInt64 {
		t.Errorf("last fetch: got [%d, %d], want [%d, %d]", seg.First, seg.Last, int64(math.MaxInt64-9), int64(math.MaxInt64))
	}
	if _, err := s.FetchSegment(t.Context(), "orders", 1); !errors.Is(err, allocator.ErrNamespaceExhausted) {
		t.Errorf("FetchSegment(1) of an exhausted namespace: got %v, want %v", err, allocator.ErrNamespaceExhausted)
	}
	if got := mustGet(t, s, "orders"); got.MaxID != math.MaxInt64 || got.Version != 1 {
		t.Errorf("exhausted namespace: got max_id %d version %d, want %d and 1", got.MaxID, got.Version, int64(math.MaxInt64))
	}
}

// testFetchLimit fetches up to max_id_limit exactly, never past or short.
func testFetchLimit(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	ns := sampleNamespace("orders")
	ns.MaxID, ns.MaxIDLimit = 0, 25
	mustCreate(t, s, ns)

	if seg := mustFetch(t, s, "orders", 10); seg.First != 1 || seg.Last != 10 || seg.Namespace.MaxIDLimit != 25 {
		t.Errorf("first fetch: got [%d, %d] limit %d, want [1, 10] limit 25", seg.First, seg.Last, seg.Namespace.MaxIDLimit)
	}
	mustRefuseFetches(t, s, "orders", mustGet(t, s, "orders"), allocator.ErrNamespaceExhausted, 16, 20, math.MaxInt64)
	if seg := mustFetch(t, s, "orders", 15); seg.First != 11 || seg.Last != 25 {
		t.Errorf("fetch of what is left: got [%d, %d], want [11, 25]", seg.First, seg.Last)
	}
	if _, err := s.FetchSegment(ctx, "orders", 1); !errors.Is(err, allocator.ErrNamespaceExhausted) {
		t.Errorf("FetchSegment(1) at the limit: got %v, want %v", err, allocator.ErrNamespaceExhausted)
	}
	// A tail given back can be fetched again, up to the limit.
	if ok, err := s.ReturnTail(ctx, "orders", 25, 2, 20); !ok || err != nil {
		t.Fatalf("ReturnTail(25, 2, 20): got %v, %v; want true, nil", ok, err)
	}
	if seg := mustFetch(t, s, "orders", 5); seg.First != 21 || seg.Last != 25 {
		t.Errorf("fetch after the tail return: got [%d, %d], want [21, 25]", seg.First, seg.Last)
	}
}

// testLimitConstraints: the table's constraints on max_id_limit.
func testLimitConstraints(t *testing.T, s allocator.Store) {
	tests := []struct {
		name   string
		change func(*allocator.Namespace)
		ok     bool
	}{
		{"fallback without a limit", func(ns *allocator.Namespace) { ns.MaxIDLimit = 0 }, false},
		{"max_id above the limit", func(ns *allocator.Namespace) { ns.MaxID, ns.MaxIDLimit = 100, 99 }, false},
		{"max_id at the limit", func(ns *allocator.Namespace) { ns.MaxID, ns.MaxIDLimit = 100, 100 }, true},
		{"a limit without the fallback", func(ns *allocator.Namespace) { ns.Fallback = allocator.FallbackNone }, true},
		{"no limit, no fallback", func(ns *allocator.Namespace) { ns.MaxIDLimit, ns.Fallback = 0, allocator.FallbackNone }, true},
	}
	for i, tt := range tests {
		ns := sampleNamespace(fmt.Sprintf("ns%d", i))
		tt.change(&ns)
		got, err := s.CreateNamespace(t.Context(), ns)
		if !tt.ok {
			if !errors.Is(err, allocator.ErrInvalidNamespace) {
				t.Errorf("%s: CreateNamespace: got %v, want %v", tt.name, err, allocator.ErrInvalidNamespace)
			}
			if _, err := s.GetNamespace(t.Context(), ns.Name); !errors.Is(err, allocator.ErrNamespaceNotFound) {
				t.Errorf("%s: GetNamespace after a refused create: got %v, want %v", tt.name, err, allocator.ErrNamespaceNotFound)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: CreateNamespace: %v", tt.name, err)
			continue
		}
		ns.Version = 0
		if d := settingsDiff(got, ns); d != "" {
			t.Errorf("%s: CreateNamespace returned %s", tt.name, d)
		}
	}
}

// testUpdateLimit: an update sets max_id_limit only where none is set, and
// the constraints hold.
func testUpdateLimit(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	ns := sampleNamespace("orders")
	ns.MaxID, ns.MaxIDLimit, ns.Fallback = 50, 0, allocator.FallbackNone
	created := mustCreate(t, s, ns)
	snowflake, none := allocator.FallbackSnowflake, allocator.FallbackNone

	for _, tt := range []struct {
		name   string
		update allocator.NamespaceUpdate
	}{
		{"fallback without a limit", allocator.NamespaceUpdate{Fallback: &snowflake}},
		{"limit below max_id", allocator.NamespaceUpdate{Fallback: &snowflake, MaxIDLimit: new(int64(49))}},
	} {
		if _, err := s.UpdateNamespace(ctx, "orders", tt.update); !errors.Is(err, allocator.ErrInvalidNamespace) {
			t.Errorf("%s: UpdateNamespace: got %v, want %v", tt.name, err, allocator.ErrInvalidNamespace)
		}
		if d := namespaceDiff(mustGet(t, s, "orders"), created); d != "" {
			t.Errorf("%s: row changed by a refused update: %s", tt.name, d)
		}
	}

	want := created
	for _, tt := range []struct {
		name   string
		update allocator.NamespaceUpdate
		limit  int64
		fb     allocator.Fallback
	}{
		{"fallback with a limit", allocator.NamespaceUpdate{Fallback: &snowflake, MaxIDLimit: new(int64(1000))}, 1000, snowflake},
		{"another limit is ignored", allocator.NamespaceUpdate{MaxIDLimit: new(int64(5000))}, 1000, snowflake},
		{"a lower limit is ignored", allocator.NamespaceUpdate{MaxIDLimit: new(int64(60))}, 1000, snowflake},
		{"fallback off keeps the limit", allocator.NamespaceUpdate{Fallback: &none}, 1000, none},
	} {
		got, err := s.UpdateNamespace(ctx, "orders", tt.update)
		if err != nil {
			t.Fatalf("%s: UpdateNamespace: %v", tt.name, err)
		}
		want.MaxIDLimit, want.Fallback = tt.limit, tt.fb
		if d := settingsDiff(got, want); d != "" {
			t.Errorf("%s: UpdateNamespace returned %s", tt.name, d)
		}
		if d := settingsDiff(mustGet(t, s, "orders"), want); d != "" {
			t.Errorf("%s: GetNamespace after the update: %s", tt.name, d)
		}
	}
}

func testConcurrentFetches(t *testing.T, s allocator.Store) {
	const (
		workers   = 16
		perWorker = 50
		start     = 5000
	)
	ns := sampleNamespace("orders")
	ns.MaxID = start - 1
	mustCreate(t, s, ns)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	results := make([][]allocator.Segment, workers)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error // the failure that stopped the others; theirs are only cancellations
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
		cancel()
	}
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				n := int64(1 + (w+i)%5) // sizes 1..5, mixed across workers
				seg, err := fetchAgainOnFailure(ctx, s, "orders", n)
				if err != nil {
					fail(fmt.Errorf("worker %d fetch %d: %w", w, i, err))
					return
				}
				if got := seg.Last - seg.First + 1; got != n {
					fail(fmt.Errorf("worker %d fetch %d: got %d IDs [%d, %d], want %d", w, i, got, seg.First, seg.Last, n))
					return
				}
				results[w] = append(results[w], seg)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}

	all := slices.Concat(results...)
	slices.SortFunc(all, func(a, b allocator.Segment) int { return cmp.Compare(a.First, b.First) })
	// Adjacent, disjoint ranges, each version one above the previous: each
	// fetch got back the row it wrote.
	next := int64(start)
	for i, seg := range all {
		if seg.First != next {
			t.Fatalf("range %d: got [%d, %d], want it to start at %d (ranges overlap or leave a gap)", i, seg.First, seg.Last, next)
		}
		if seg.Namespace.MaxID != seg.Last || seg.Namespace.Version != int64(i+1) {
			t.Errorf("range %d [%d, %d]: namespace read back max_id %d version %d, want %d and %d",
				i, seg.First, seg.Last, seg.Namespace.MaxID, seg.Namespace.Version, seg.Last, i+1)
		}
		next = seg.Last + 1
	}
	got := mustGet(t, s, "orders")
	if got.MaxID != next-1 || got.Version != workers*perWorker {
		t.Errorf("after %d fetches: got max_id %d version %d, want %d and %d",
			workers*perWorker, got.MaxID, got.Version, next-1, workers*perWorker)
	}
}

// fetchTries bounds the tries of one fetch in fetchAgainOnFailure.
const fetchTries = 10

// fetchAgainOnFailure fetches, retrying up to fetchTries times: on a
// loaded machine queued fetches can exceed the lock wait and fail without
// writing, which the contract allows. A failed fetch that wrote would
// leave a gap, caught by the range checks.
func fetchAgainOnFailure(ctx context.Context, s allocator.Store, name string, n int64) (allocator.Segment, error) {
	for try := 1; ; try++ {
		seg, err := s.FetchSegment(ctx, name, n)
		if err == nil || try == fetchTries || ctx.Err() != nil || errors.Is(err, allocator.ErrNamespaceNotFound) ||
			errors.Is(err, allocator.ErrNamespaceExhausted) || errors.Is(err, allocator.ErrInvalidNamespace) {
			return seg, err
		}
	}
}

func testReturnTail(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	createFresh(t, s, "orders")

	seg := mustFetch(t, s, "orders", 100) // [1, 100], version 1
	// The node used 1..30 and gives back 31..100.
	ok, err := s.ReturnTail(ctx, "orders", seg.Last, seg.Namespace.Version, 30)
	if err != nil || !ok {
		t.Fatalf("ReturnTail(100, 1, 30): got %v, %v; want true, nil", ok, err)
	}
	if got := mustGet(t, s, "orders"); got.MaxID != 30 || got.Version != 2 {
		t.Errorf("after ReturnTail: got max_id %d version %d, want 30 and 2", got.MaxID, got.Version)
	}
	next := mustFetch(t, s, "orders", 10)
	if next.First != 31 || next.Last != 40 || next.Namespace.Version != 3 {
		t.Errorf("fetch after ReturnTail: got [%d, %d] version %d, want [31, 40] version 3", next.First, next.Last, next.Namespace.Version)
	}

	// Giving back nothing (the whole range was used) still succeeds.
	ok, err = s.ReturnTail(ctx, "orders", 40, 3, 40)
	if err != nil || !ok {
		t.Errorf("ReturnTail of an empty tail: got %v, %v; want true, nil", ok, err)
	}
	if got := mustGet(t, s, "orders"); got.MaxID != 40 || got.Version != 4 {
		t.Errorf("after ReturnTail of an empty tail: got max_id %d version %d, want 40 and 4", got.MaxID, got.Version)
	}
}

func testReturnTailStale(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	createFresh(t, s, "orders")
	mine := mustFetch(t, s, "orders", 100) // [1, 100], version 1
	mustFetch(t, s, "orders", 100)         // another node: [101, 200], version 2
	before := mustGet(t, s, "orders")

	tests := []struct {
		name                     string
		maxID, version, newMaxID int64
	}{
		{"fetched since", mine.Last, mine.Namespace.Version, 50},
		{"stale max_id", mine.Last, before.Version, 50},
		{"stale version", before.MaxID, mine.Namespace.Version, 150},
		{"future version", before.MaxID, before.Version + 1, 150},
	}
	for _, tt := range tests {
		ok, err := s.ReturnTail(ctx, "orders", tt.maxID, tt.version, tt.newMaxID)
		if ok || err != nil {
			t.Errorf("%s: ReturnTail(%d, %d, %d): got %v, %v; want false, nil", tt.name, tt.maxID, tt.version, tt.newMaxID, ok, err)
		}
		if d := namespaceDiff(mustGet(t, s, "orders"), before); d != "" {
			t.Errorf("%s: row changed by a refused ReturnTail: %s", tt.name, d)
		}
	}

	// Moving max_id up is no tail return.
	ok, err := s.ReturnTail(ctx, "orders", before.MaxID, before.Version, before.MaxID+1)
	if ok || !errors.Is(err, allocator.ErrInvalidNamespace) {
		t.Errorf("ReturnTail above max_id: got %v, %v; want false, %v", ok, err, allocator.ErrInvalidNamespace)
	}
	if d := namespaceDiff(mustGet(t, s, "orders"), before); d != "" {
		t.Errorf("row changed by ReturnTail above max_id: %s", d)
	}
}

// testStrictRevision: a strict namespace's revision grows with every fetch
// and is never shared, across tail returns, setting changes, refusals,
// deletion and revival, and concurrency.
func testStrictRevision(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	ns := sampleNamespace("invoices") // strict
	ns.MaxID, ns.MaxIDLimit = 0, 1000
	mustCreate(t, s, ns)

	seen := map[int64]string{} // revision -> the fetch that got it
	var last int64
	check := func(what string, seg allocator.Segment) {
		t.Helper()
		rev := seg.Namespace.Version
		if prev, ok := seen[rev]; ok {
			t.Fatalf("%s: revision %d, already given to %s", what, rev, prev)
		}
		if rev <= last {
			t.Fatalf("%s: revision %d, want above the previous %d", what, rev, last)
		}
		seen[rev], last = what, rev
	}
	for i := range 3 {
		check(fmt.Sprintf("fetch %d", i), mustFetch(t, s, "invoices", 1))
	}

	// Buffered, a tail given back, strict again with a new step.
	buffered, strict := allocator.ModeBuffered, allocator.ModeStrict
	if _, err := s.UpdateNamespace(ctx, "invoices", allocator.NamespaceUpdate{Mode: &buffered}); err != nil {
		t.Fatalf("UpdateNamespace(buffered): %v", err)
	}
	seg := mustFetch(t, s, "invoices", 100)
	check("buffered fetch", seg)
	if ok, err := s.ReturnTail(ctx, "invoices", seg.Last, seg.Namespace.Version, seg.First+9); err != nil || !ok {
		t.Fatalf("ReturnTail: got %v, %v; want true, nil", ok, err)
	}
	step := int64(50)
	if _, err := s.UpdateNamespace(ctx, "invoices", allocator.NamespaceUpdate{Mode: &strict, Step: &step}); err != nil {
		t.Fatalf("UpdateNamespace(strict): %v", err)
	}
	check("fetch after a tail return and two updates", mustFetch(t, s, "invoices", 2))

	// A refused fetch gives no revision and takes none away.
	if _, err := s.FetchSegment(ctx, "invoices", 1000); !errors.Is(err, allocator.ErrNamespaceExhausted) {
		t.Fatalf("FetchSegment past the limit: got %v, want %v", err, allocator.ErrNamespaceExhausted)
	}
	check("fetch after a refused one", mustFetch(t, s, "invoices", 1))

	// Deleted and created again: the revision goes on.
	del, err := s.DeleteNamespace(ctx, "invoices")
	if err != nil {
		t.Fatalf("DeleteNamespace: %v", err)
	}
	again := ns
	again.MaxID = del.MaxID
	if _, err := s.CreateNamespace(ctx, again); err != nil {
		t.Fatalf("CreateNamespace over the tombstone: %v", err)
	}
	check("fetch after a revival", mustFetch(t, s, "invoices", 1))

	// Concurrent fetches: distinct revisions, all above the last.
	const workers, perWorker = 8, 10
	revs := make([][]int64, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range perWorker {
				seg, err := s.FetchSegment(ctx, "invoices", 1)
				if err != nil {
					errs[w] = err
					return
				}
				revs[w] = append(revs[w], seg.Namespace.Version)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent fetches: %v", err)
	}
	all := slices.Concat(revs...)
	slices.Sort(all)
	for i, rev := range all {
		check(fmt.Sprintf("concurrent fetch %d", i), allocator.Segment{Namespace: allocator.Namespace{Version: rev}})
	}
	if got := mustGet(t, s, "invoices").Version; got != last {
		t.Errorf("row version after the fetches: got %d, want the last revision %d", got, last)
	}
}

// testNamespaceStride: stride and offset round-trip; the counter counts
// slots; a fetch never passes the last slot whose ID fits an int64.
func testNamespaceStride(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	ns := sampleNamespace("orders")
	ns.MaxID, ns.Stride, ns.Offset = 0, 3, 2
	got := mustCreate(t, s, ns)
	if got.Stride != 3 || got.Offset != 2 {
		t.Errorf("CreateNamespace: got stride %d offset %d, want 3, 2", got.Stride, got.Offset)
	}
	if d := settingsDiff(mustGet(t, s, "orders"), ns); d != "" {
		t.Errorf("GetNamespace: %s", d)
	}
	seg := mustFetch(t, s, "orders", 10)
	if seg.First != 1 || seg.Last != 10 || seg.Namespace.Stride != 3 || seg.Namespace.Offset != 2 {
		t.Errorf("first fetch: got slots [%d, %d] stride %d offset %d, want [1, 10] stride 3 offset 2",
			seg.First, seg.Last, seg.Namespace.Stride, seg.Namespace.Offset)
	}
	list, err := s.ListNamespaces(ctx)
	if err != nil || len(list) != 1 || list[0].Stride != 3 || list[0].Offset != 2 {
		t.Errorf("ListNamespaces: got %+v, %v; want orders with stride 3 offset 2", list, err)
	}
	// A namespace made without a stride reads back with stride 1, offset 0.
	plain := sampleNamespace("plain")
	if got := mustCreate(t, s, plain); got.Stride != 1 || got.Offset != 0 {
		t.Errorf("CreateNamespace without a stride: got stride %d offset %d, want 1, 0", got.Stride, got.Offset)
	}

	top := allocator.Namespace{Name: "top", Step: 10, MinStep: 10, MaxStep: 10, Mode: allocator.ModeBuffered,
		Fallback: allocator.FallbackNone, Stride: 4, Offset: 3}
	last := top.StrideCap() // slot last has the ID last×4+3, the largest that fits
	top.MaxID = last - 10
	mustCreate(t, s, top)
	if seg := mustFetch(t, s, "top", 10); seg.Last != last || top.IDOf(seg.Last) < 0 {
		t.Errorf("fetch up to the last slot: got [%d, %d], want it to end at %d", seg.First, seg.Last, last)
	}
	before := mustGet(t, s, "top")
	mustRefuseFetches(t, s, "top", before, allocator.ErrNamespaceExhausted, 1, 10)
}
