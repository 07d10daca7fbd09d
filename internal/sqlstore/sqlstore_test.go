package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

// TestLeaseEventQuery checks the SELECT of ListLeaseEvents in both
// placeholder styles: one condition a filter field, in a fixed order, and
// the limit last.
func TestLeaseEventQuery(t *testing.T) {
	dc, w := int64(1), int64(7)
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := allocator.LeaseEventFilter{AfterID: 10, DatacenterID: &dc, WorkerID: &w, Holder: "h", Owner: "o",
		Kind: allocator.EventRelease, Since: since, Until: since.Add(time.Hour), Limit: 5}
	timeArg := func(t time.Time) any { return t.Format(time.RFC3339) }
	for _, tc := range []struct {
		ph   func(int) string
		want string
	}{
		{Question, `SELECT c FROM lease_events WHERE id > ? AND datacenter_id = ? AND worker_id = ? AND holder = ? AND owner = ? AND event = ? AND at >= ? AND at < ? ORDER BY id LIMIT ?`},
		{Dollar, `SELECT c FROM lease_events WHERE id > $1 AND datacenter_id = $2 AND worker_id = $3 AND holder = $4 AND owner = $5 AND event = $6 AND at >= $7 AND at < $8 ORDER BY id LIMIT $9`},
	} {
		d := Dialect{Name: "x", Placeholder: tc.ph, TimeArg: timeArg}
		q, args := d.leaseEventQuery(f, "c")
		if q != tc.want {
			t.Errorf("query = %s\nwant %s", q, tc.want)
		}
		wantArgs := []any{int64(10), dc, w, "h", "o", string(allocator.EventRelease),
			timeArg(since), timeArg(since.Add(time.Hour)), 5}
		if !reflect.DeepEqual(args, wantArgs) {
			t.Errorf("args = %#v, want %#v", args, wantArgs)
		}
	}
	d := Dialect{Name: "x", Placeholder: Dollar, TimeArg: timeArg}
	q, args := d.leaseEventQuery(allocator.LeaseEventFilter{Limit: 3}, "c")
	if want := `SELECT c FROM lease_events WHERE id > $1 ORDER BY id LIMIT $2`; q != want || len(args) != 2 {
		t.Errorf("empty filter: query %s, %d args; want %s, 2 args", q, len(args), want)
	}
}

// TestPruneLeaseEvents checks that pruning stops at the first batch that
// is not full, and that errors carry the store's name and the count so far.
func TestPruneLeaseEvents(t *testing.T) {
	d := Dialect{Name: "x", TimeArg: func(t time.Time) any { return t }}
	ctx := context.Background()
	left := int64(5)
	total, err := d.PruneLeaseEvents(ctx, time.Now(), 2, func(_ context.Context, _ any, batch int) (int64, error) {
		n := min(left, int64(batch))
		left -= n
		return n, nil
	})
	if total != 5 || err != nil || left != 0 {
		t.Errorf("prune = %d, %v (left %d); want 5, nil (left 0)", total, err, left)
	}
	calls := 0
	total, err = d.PruneLeaseEvents(ctx, time.Now(), 2, func(context.Context, any, int) (int64, error) {
		if calls++; calls == 2 {
			return 0, errors.New("boom")
		}
		return 2, nil
	})
	if total != 2 || err == nil || err.Error() != "x: prune lease events: boom" {
		t.Errorf("prune = %d, %v; want 2, x: prune lease events: boom", total, err)
	}
	total, err = d.PruneLeaseEvents(ctx, time.Time{}, 2, func(context.Context, any, int) (int64, error) {
		t.Error("prune ran for a zero time")
		return 0, nil
	})
	if total != 0 || err != nil {
		t.Errorf("prune before the zero time = %d, %v; want 0, nil", total, err)
	}
}

// TestLeaseErrors checks the wording the three stores share.
func TestLeaseErrors(t *testing.T) {
	d := Dialect{Name: "x", NoRows: sql.ErrNoRows}
	key := allocator.LeaseKey{DatacenterID: 1, WorkerID: 2}
	hb := allocator.HeartbeatRequest{Key: key, Holder: "h", FencingVersion: 3}
	notHeld := func() (int64, error) { return 0, nil }
	heldSo := func() (int64, error) { return 1, nil }
	if err := d.HeartbeatError(hb, nil, notHeld); err != nil {
		t.Errorf("HeartbeatError(nil) = %v", err)
	}
	err := d.HeartbeatError(hb, sql.ErrNoRows, notHeld)
	if !errors.Is(err, allocator.ErrLeaseLost) || errors.Is(err, allocator.ErrLeaseSecret) ||
		err.Error() != `x: heartbeat of worker 1/2 by "h" at version 3: `+allocator.ErrLeaseLost.Error() {
		t.Errorf("HeartbeatError(no rows) = %v", err)
	}
	err = d.HeartbeatError(hb, sql.ErrNoRows, heldSo)
	if !errors.Is(err, allocator.ErrLeaseLost) || !errors.Is(err, allocator.ErrLeaseSecret) {
		t.Errorf("HeartbeatError(no rows, held by the holder) = %v, want ErrLeaseLost and ErrLeaseSecret", err)
	}
	if err := d.HeartbeatError(hb, errors.New("boom"), notHeld); err.Error() != "x: heartbeat of worker 1/2: boom" {
		t.Errorf("HeartbeatError(boom) = %v", err)
	}
	rel := allocator.ReleaseRequest{Key: key, Holder: "h", FencingVersion: 3}
	_, err = d.Release(rel, func() Scanner { return errRow{sql.ErrNoRows} }, notHeld,
		func(int64) error { t.Error("write after no row"); return nil },
		func(allocator.LeaseEvent) error { t.Error("record after no row"); return nil })
	if !errors.Is(err, allocator.ErrLeaseLost) || err.Error() != `x: release of worker 1/2 by "h" at version 3: `+allocator.ErrLeaseLost.Error() {
		t.Errorf("Release(no rows) = %v", err)
	}
}

// errRow is a row whose Scan fails with its error.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// TestTombstone checks when revive may revive a row.
func TestTombstone(t *testing.T) {
	d := Dialect{Name: "x", NoRows: sql.ErrNoRows}
	dup, boom := errors.New("dup"), errors.New("boom")
	tomb := allocator.Namespace{DeletedAt: time.Now()}
	for _, tc := range []struct {
		name string
		row  allocator.Namespace
		err  error
		want error
	}{
		{"tombstone", tomb, nil, nil},
		{"live", allocator.Namespace{}, nil, dup},
		{"gone", allocator.Namespace{}, sql.ErrNoRows, dup},
		{"failed", allocator.Namespace{}, boom, boom},
	} {
		if got := d.tombstone(tc.row, tc.err, dup); !errors.Is(got, tc.want) {
			t.Errorf("%s: tombstone = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCreateNamespace checks the first step of CreateNamespace: the row
// the INSERT wrote is returned as it is, a name in use goes on to the
// revival in a transaction of run, and any other error of the INSERT
// through SegmentError, with no transaction.
func TestCreateNamespace(t *testing.T) {
	dup, boom := errors.New("dup"), errors.New("boom")
	d := Dialect{Name: "x", NoRows: sql.ErrNoRows,
		DuplicateName: func(err error) bool { return errors.Is(err, dup) },
		SegmentError:  func(op, name string, err error) error { return fmt.Errorf("x: %s %q: %w", op, name, err) }}
	ns := allocator.Namespace{Name: "orders"}
	tomb := allocator.Namespace{Name: "orders", DeletedAt: time.Now()}
	for _, tc := range []struct {
		name        string
		insertErr   error
		wantTx      bool
		wantVersion int64 // the tombstone's plus one when revived
		wantErr     string
	}{
		{"inserted", nil, false, 0, ""},
		{"name in use", dup, true, 1, ""},
		{"refused", boom, false, 0, `x: create namespace "orders": boom`},
	} {
		ran := false
		run := func(ctx context.Context, fn func(tx int) error) error { ran = true; return fn(0) }
		got, err := CreateNamespace(context.Background(), d, run, ns,
			func(context.Context) (allocator.Namespace, error) { return ns, tc.insertErr },
			func(int) (allocator.Namespace, error) { return tomb, nil },
			func(_ int, next allocator.Namespace) (allocator.Namespace, error) { return next, nil })
		if ran != tc.wantTx {
			t.Errorf("%s: revival transaction ran %v, want %v", tc.name, ran, tc.wantTx)
		}
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%s: got %v, want %s", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got.Name != "orders" || !got.DeletedAt.IsZero() || got.Version != tc.wantVersion {
			t.Errorf("%s: got %+v, %v; want the live namespace orders at version %d", tc.name, got, err, tc.wantVersion)
		}
	}
}
