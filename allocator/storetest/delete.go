package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/idgen-project/idgen/allocator"
)

// testDeleteNamespace: a deleted namespace is gone but keeps its row;
// deleting again is NotFound.
func testDeleteNamespace(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	ns := createFresh(t, s, "orders")
	mustCreate(t, s, sampleNamespace("other"))
	seg := mustFetch(t, s, "orders", 100) // [1, 100], version 1

	deleted, err := s.DeleteNamespace(ctx, "orders")
	if err != nil {
		t.Fatalf("DeleteNamespace: %v", err)
	}
	if deleted.Name != "orders" || deleted.MaxID != 100 || deleted.Version != 1 || deleted.DeletedAt.IsZero() ||
		!plausible(deleted.DeletedAt) || deleted.UpdatedAt.Before(seg.Namespace.UpdatedAt) {
		t.Errorf("DeleteNamespace returned %+v; want orders at max_id 100, version 1, deleted at database time", deleted)
	}

	notFound := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, allocator.ErrNamespaceNotFound) {
			t.Errorf("%s of a deleted namespace: got %v, want %v", what, err, allocator.ErrNamespaceNotFound)
		}
	}
	_, err = s.GetNamespace(ctx, "orders")
	notFound("GetNamespace", err)
	_, err = s.FetchSegment(ctx, "orders", 10)
	notFound("FetchSegment", err)
	_, err = s.UpdateNamespace(ctx, "orders", allocator.NamespaceUpdate{Description: new("x")})
	notFound("UpdateNamespace", err)
	_, err = s.UpdateNamespace(ctx, "orders", allocator.NamespaceUpdate{})
	notFound("UpdateNamespace with no change", err)
	_, err = s.DeleteNamespace(ctx, "orders")
	notFound("DeleteNamespace", err)
	// The node that fetched [1, 100] cannot give a tail back to it.
	if ok, err := s.ReturnTail(ctx, "orders", seg.Last, seg.Namespace.Version, 30); ok || err != nil {
		t.Errorf("ReturnTail to a deleted namespace: got %v, %v; want false, nil", ok, err)
	}
	list, err := s.ListNamespaces(ctx)
	if err != nil {
		t.Fatalf("ListNamespaces: %v", err)
	}
	if len(list) != 1 || list[0].Name != "other" {
		t.Errorf("ListNamespaces after the deletion: got %d namespaces (%+v), want just other", len(list), list)
	}
	// The tombstone refuses a restart at the old start.
	ns.MaxID = 0
	_, err = s.CreateNamespace(ctx, ns)
	if !errors.Is(err, allocator.ErrInvalidNamespace) || !strings.Contains(err.Error(), "max_id 100") {
		t.Errorf("CreateNamespace at start 1 after the deletion: got %v, want %v naming max_id 100", err, allocator.ErrInvalidNamespace)
	}
	_, err = s.GetNamespace(ctx, "orders")
	notFound("GetNamespace after a refused revival", err)
	if d := settingsDiff(mustGet(t, s, "other"), sampleNamespace("other")); d != "" {
		t.Errorf("the other namespace changed: %s", d)
	}
}

func testDeleteUnknown(t *testing.T, s allocator.Store) {
	mustCreate(t, s, sampleNamespace("orders"))
	for _, name := range []string{"missing", "Orders", ""} {
		if _, err := s.DeleteNamespace(t.Context(), name); !errors.Is(err, allocator.ErrNamespaceNotFound) {
			t.Errorf("DeleteNamespace(%q): got %v, want %v", name, err, allocator.ErrNamespaceNotFound)
		}
	}
	if d := settingsDiff(mustGet(t, s, "orders"), sampleNamespace("orders")); d != "" {
		t.Errorf("existing namespace changed: %s", d)
	}
}

// testReviveNamespace: a revival starts above the old max_id, with new
// settings and the version going on.
func testReviveNamespace(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	ns := sampleNamespace("orders")
	ns.MaxID, ns.MaxIDLimit, ns.Fallback = 0, 0, allocator.FallbackNone
	mustCreate(t, s, ns)
	old := mustFetch(t, s, "orders", 100) // [1, 100], version 1
	mustFetch(t, s, "orders", 50)         // [101, 150], version 2
	tomb, err := s.DeleteNamespace(ctx, "orders")
	if err != nil {
		t.Fatalf("DeleteNamespace: %v", err)
	}

	for _, maxID := range []int64{0, 99, 149} {
		again := ns
		again.MaxID = maxID
		_, err := s.CreateNamespace(ctx, again)
		if !errors.Is(err, allocator.ErrInvalidNamespace) || errors.Is(err, allocator.ErrNamespaceExists) || !strings.Contains(err.Error(), "above 150") {
			t.Errorf("CreateNamespace at start %d after deletion at max_id 150: got %v, want %v saying to start above 150",
				maxID+1, err, allocator.ErrInvalidNamespace)
		}
	}

	next := allocator.Namespace{Name: "orders", MaxID: 150, Step: 20, MinStep: 5, MaxStep: 400,
		Mode: allocator.ModeBuffered, Fallback: allocator.FallbackNone, Description: "second life", Version: 99}
	got, err := s.CreateNamespace(ctx, next)
	if err != nil {
		t.Fatalf("CreateNamespace at start 151: %v", err)
	}
	want := next
	want.Version = tomb.Version + 1
	if d := settingsDiff(got, want); d != "" || !got.DeletedAt.IsZero() {
		t.Errorf("revived namespace: %s (deleted at %v); want the new settings, version %d, not deleted", d, got.DeletedAt, tomb.Version+1)
	}
	if got.CreatedAt.Before(tomb.DeletedAt) || !got.UpdatedAt.Equal(got.CreatedAt) {
		t.Errorf("revived namespace: created %v updated %v, want both the revival's time, not before the deletion at %v",
			got.CreatedAt, got.UpdatedAt, tomb.DeletedAt)
	}
	if d := namespaceDiff(mustGet(t, s, "orders"), got); d != "" {
		t.Errorf("GetNamespace after the revival: %s", d)
	}
	// A tail return of a range fetched before the deletion cannot match.
	if ok, err := s.ReturnTail(ctx, "orders", old.Last, old.Namespace.Version, 10); ok || err != nil {
		t.Errorf("ReturnTail of a range from before the deletion: got %v, %v; want false, nil", ok, err)
	}
	if seg := mustFetch(t, s, "orders", 20); seg.First != 151 || seg.Last != 170 || seg.Namespace.Version != tomb.Version+2 {
		t.Errorf("first fetch after the revival: [%d, %d] version %d, want [151, 170] version %d",
			seg.First, seg.Last, seg.Namespace.Version, tomb.Version+2)
	}
	if _, err := s.CreateNamespace(ctx, next); !errors.Is(err, allocator.ErrNamespaceExists) {
		t.Errorf("CreateNamespace of the revived namespace: got %v, want %v", err, allocator.ErrNamespaceExists)
	}
	if list, err := s.ListNamespaces(ctx); err != nil || len(list) != 1 || list[0].Name != "orders" {
		t.Errorf("ListNamespaces after the revival: %+v, %v; want orders", list, err)
	}
}

// testReviveKeepsLimit: a revival keeps the old max_id_limit when lower
// and may not start above it.
func testReviveKeepsLimit(t *testing.T, s allocator.Store) {
	ctx := t.Context()
	ns := sampleNamespace("orders") // fallback snowflake, limit 2^50, max_id 41
	mustCreate(t, s, ns)
	mustFetch(t, s, "orders", 59) // max_id 100
	del := func() {
		t.Helper()
		if _, err := s.DeleteNamespace(ctx, "orders"); err != nil {
			t.Fatalf("DeleteNamespace: %v", err)
		}
	}
	del()

	// Above the kept limit: refused.
	again := ns
	again.MaxID, again.MaxIDLimit, again.Fallback = 1<<50+1, 0, allocator.FallbackNone
	if _, err := s.CreateNamespace(ctx, again); !errors.Is(err, allocator.ErrInvalidNamespace) {
		t.Errorf("revival above the deleted namespace's limit: got %v, want %v", err, allocator.ErrInvalidNamespace)
	}
	for _, tc := range []struct {
		name     string
		limit    int64
		fallback allocator.Fallback
		want     int64
	}{
		{"no limit asked for", 0, allocator.FallbackNone, 1 << 50},
		{"a higher limit with the fallback", 1 << 55, allocator.FallbackSnowflake, 1 << 50},
		{"a lower limit", 1 << 40, allocator.FallbackSnowflake, 1 << 40},
	} {
		again := ns
		again.MaxID, again.MaxIDLimit, again.Fallback = 100, tc.limit, tc.fallback
		got, err := s.CreateNamespace(ctx, again)
		if err != nil {
			t.Fatalf("%s: CreateNamespace: %v", tc.name, err)
		}
		if got.MaxIDLimit != tc.want || got.Fallback != tc.fallback {
			t.Errorf("%s: revived with limit %d fallback %s, want %d %s", tc.name, got.MaxIDLimit, got.Fallback, tc.want, tc.fallback)
		}
		del()
	}
}
