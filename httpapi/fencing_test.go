package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/snowflake"
)

// TestIDsFencingTokens: Snowflake answers carry the lease that made their
// IDs, strict namespace answers the revision of their fetch, and buffered
// namespace answers neither.
func TestIDsFencingTokens(t *testing.T) {
	testserver.Parallel(t, testserver.Dialects, testIDsFencingTokens)
}

func testIDsFencingTokens(t *testing.T, dialect string) {
	e := newEnv(t, envOptions{dialect: dialect})
	e.createNamespace(allocator.Namespace{Name: "orders"})
	e.createNamespace(allocator.Namespace{Name: "invoices", Mode: allocator.ModeStrict})

	t.Run("snowflake", func(t *testing.T) {
		r := getOK[idsResponse](t, e, "/ids?count=3")
		st := e.keeper.Status()
		want := fencingLease{Datacenter: st.Lease.DatacenterID, Worker: st.Lease.WorkerID, FencingVersion: st.Lease.FencingVersion}
		if r.Lease == nil || *r.Lease != want || want.FencingVersion < 1 {
			t.Fatalf("lease: got %+v, want the keeper's %+v", r.Lease, want)
		}
		if r.Revision != 0 {
			t.Errorf("revision: got %d, want none on Snowflake IDs", r.Revision)
		}
		for _, id := range parseIDs(t, r.IDs) {
			if p := e.keeper.Layout().Decompose(snowflake.ID(id)); p.Datacenter != want.Datacenter || p.Worker != want.Worker {
				t.Errorf("ID %d: datacenter %d worker %d, but the lease says %d/%d", id, p.Datacenter, p.Worker, want.Datacenter, want.Worker)
			}
		}
	})

	t.Run("buffered namespace", func(t *testing.T) {
		rec := e.do("GET", "/ids?count=2&namespace=orders", "")
		wantStatus(t, rec, 200)
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &keys); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"lease", "revision"} {
			if v, ok := keys[k]; ok {
				t.Errorf("buffered namespace answer has %q: %s", k, v)
			}
		}
	})

	t.Run("strict namespace", func(t *testing.T) {
		var last int64
		for i := range 4 {
			r := getOK[idsResponse](t, e, "/ids?count=2&namespace=invoices")
			row, err := e.store.GetNamespace(t.Context(), "invoices")
			if err != nil {
				t.Fatal(err)
			}
			if r.Source != "segment" || r.Lease != nil {
				t.Errorf("draw %d: source %q, lease %+v; want segment and no lease", i, r.Source, r.Lease)
			}
			if r.Revision != row.Version || r.Revision <= last {
				t.Errorf("draw %d: revision %d, want the row's version %d, above the previous %d", i, r.Revision, row.Version, last)
			}
			last = r.Revision
		}
	})
}
