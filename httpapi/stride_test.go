package httpapi_test

import (
	"strings"
	"testing"

	"github.com/idgen-project/idgen/httpapi"
)

// TestAdminNamespaceStride: POST /admin/namespaces takes a stride and an
// offset, shows them, and /ids hands out slot×stride+offset; a bad stride
// or offset is a 400 that creates nothing, and a PATCH cannot change them.
func TestAdminNamespaceStride(t *testing.T) {
	e := newEnv(t, envOptions{token: testToken})

	for _, tt := range []struct {
		name, body, want string
	}{
		{"offset at the stride", `{"name":"bad","stride":2,"offset":2}`, "offset 2"},
		{"stride zero", `{"name":"bad","stride":0}`, "stride 0"},
		{"offset without a stride", `{"name":"bad","offset":1}`, "offset 1"},
		{"start whose ID overflows", `{"name":"bad","stride":4,"start":"4611686018427387904"}`, "start 4611686018427387904"},
	} {
		rec := e.admin("POST", "/admin/namespaces", tt.body)
		wantStatus(t, rec, 400)
		if !strings.Contains(rec.Body.String(), tt.want) {
			t.Errorf("%s: got body %s, want it to name %q", tt.name, rec.Body.String(), tt.want)
		}
	}
	if rec := e.admin("GET", "/admin/namespaces/bad", ""); rec.Code != 404 {
		t.Fatalf("GET of a refused namespace: got %d, want 404; body %s", rec.Code, rec.Body.String())
	}

	rec := e.admin("POST", "/admin/namespaces", `{"name":"orders","stride":2,"offset":1,"step":10,"start":"5"}`)
	wantStatus(t, rec, 201)
	var ns httpapi.NamespaceJSON
	decode(t, rec, &ns)
	if ns.Stride != 2 || ns.Offset != 1 || ns.MaxID != "4" {
		t.Fatalf("created: got %+v, want stride 2 offset 1 max_id 4", ns)
	}

	// Slots 5, 6, … are the IDs 11, 13, …: one range each.
	r := getOK[idsResponse](t, e, "/ids?count=25&namespace=orders")
	ids := parseIDs(t, r.IDs)
	for i, id := range ids {
		if want := int64(5+i)*2 + 1; id != want {
			t.Fatalf("ID %d: got %d, want %d (IDs %v)", i, id, want, ids)
		}
	}
	if len(r.Ranges) != len(ids) {
		t.Errorf("ranges: got %d for %d IDs, want one per ID", len(r.Ranges), len(ids))
	}
	checkRanges(t, ids, r.Ranges)

	rec = e.admin("PATCH", "/admin/namespaces/orders", `{"stride":3}`)
	wantStatus(t, rec, 400)
	rec = e.admin("GET", "/admin/namespaces/orders", "")
	wantStatus(t, rec, 200)
	decode(t, rec, &ns)
	if ns.Stride != 2 || ns.Offset != 1 {
		t.Errorf("after a refused PATCH: got stride %d offset %d, want 2, 1", ns.Stride, ns.Offset)
	}
}
