package client

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/snowflake"
)

// replayer sits in front of an idgen node: it remembers the answers to
// GET /ids and, once told, answers the next request with an old one.
type replayer struct {
	next http.Handler

	mu     sync.Mutex
	bodies [][]byte // the answers given, oldest first
	replay int      // answer the next request with bodies[replay-1]; 0: pass through
}

func (p *replayer) replayNext(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.replay = i + 1
}

func (p *replayer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	replay := p.replay
	p.replay = 0
	var body []byte
	if replay > 0 {
		body = p.bodies[replay-1]
	}
	p.mu.Unlock()
	if body == nil {
		rec := httptest.NewRecorder()
		p.next.ServeHTTP(rec, r)
		body = rec.Body.Bytes()
		if rec.Code != http.StatusOK {
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(body)
			return
		}
		p.mu.Lock()
		p.bodies = append(p.bodies, body)
		p.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// TestStrictRevisionReplay: a replayed answer of a strict namespace is
// refused with a *StaleRevisionError and its IDs are not returned; fresh
// answers go on being accepted, and namespaces are tracked apart.
func TestStrictRevisionReplay(t *testing.T) {
	node := testserver.MustStart(t, testserver.Options{})
	for _, name := range []string{"invoices", "receipts"} {
		node.CreateNamespace(t, allocator.NamespaceSpec{Name: name, Mode: new(allocator.ModeStrict)})
	}
	p := &replayer{next: node.Handler()}
	ts := httptest.NewServer(p)
	t.Cleanup(ts.Close)
	c := newTestClient(t, ts.URL, Options{}, newFakeClock())

	var revs []int64
	for i := range 3 {
		d, err := c.DrawNamespace(bg, "invoices", 2)
		if err != nil {
			t.Fatalf("draw %d: %v", i, err)
		}
		if want := []int64{int64(2*i + 1), int64(2*i + 2)}; !slices.Equal(d.IDs, want) || d.Revision < 1 || len(d.Leases) != 0 {
			t.Fatalf("draw %d: IDs %v, revision %d, leases %v; want %v, a revision, no lease", i, d.IDs, d.Revision, d.Leases, want)
		}
		if len(revs) > 0 && d.Revision <= revs[len(revs)-1] {
			t.Fatalf("draw %d: revision %d not above %d", i, d.Revision, revs[len(revs)-1])
		}
		revs = append(revs, d.Revision)
	}

	for _, old := range []int{0, 2} { // the first answer, and the last one again
		p.replayNext(old)
		d, err := c.DrawNamespace(bg, "invoices", 2)
		var stale *StaleRevisionError
		if !errors.As(err, &stale) {
			t.Fatalf("replay of answer %d: got %v, want a *StaleRevisionError", old, err)
		}
		if want := (StaleRevisionError{Namespace: "invoices", Got: revs[old], Previous: revs[2]}); *stale != want {
			t.Errorf("replay of answer %d: got %+v, want %+v", old, *stale, want)
		}
		if len(d.IDs) != 0 {
			t.Errorf("replay of answer %d: IDs %v returned with the error", old, d.IDs)
		}
	}

	// The node itself goes on: its next answer is fresh.
	d, err := c.DrawNamespace(bg, "invoices", 2)
	if err != nil || !slices.Equal(d.IDs, []int64{7, 8}) || d.Revision <= revs[2] {
		t.Fatalf("draw after the replays: %v, %v, revision %d; want 7, 8 above revision %d", d.IDs, err, d.Revision, revs[2])
	}
	// Another namespace has revisions of its own: its first is accepted,
	// though below those of invoices.
	if r, err := c.DrawNamespace(bg, "receipts", 1); err != nil || r.Revision < 1 || r.Revision >= d.Revision {
		t.Fatalf("receipts: revision %d, %v; want its own, below invoices' %d", r.Revision, err, d.Revision)
	}
}

// TestStrictRevisionOutOfOrder: answers to concurrent requests may arrive
// in any order; one whose revision is below that of an answer that
// arrived first is not stale when that answer was not seen before the
// request was sent.
func TestStrictRevisionOutOfOrder(t *testing.T) {
	var (
		mu      sync.Mutex
		rev     int64
		arrived = make(chan struct{})
		release = make(chan struct{})
	)
	firstArrived := arrived
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		rev++
		mine, arrivedC, releaseC := rev, arrived, release
		mu.Unlock()
		if mine == 1 && arrivedC != nil {
			close(arrivedC)
			<-releaseC // answer after the second request's answer
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"ids":["%d"],"namespace":"invoices","source":"segment","ranges":[{"first":"%d","last":"%d"}],"revision":%d}`,
			mine, mine, mine, mine)
	}))
	t.Cleanup(ts.Close)
	c := newTestClient(t, ts.URL, Options{}, newFakeClock())

	slow := make(chan error, 1)
	go func() {
		_, err := c.DrawNamespace(bg, "invoices", 1)
		slow <- err
	}()
	<-firstArrived
	d, err := c.DrawNamespace(bg, "invoices", 1)
	close(release)
	if err != nil || d.Revision != 2 {
		t.Fatalf("second request: revision %d, %v; want 2, nil", d.Revision, err)
	}
	if err := <-slow; err != nil {
		t.Errorf("first request, answered last with revision 1: %v, want no error", err)
	}
	// Sent after revision 2 was seen, an answer with revision 1 is stale.
	mu.Lock()
	rev, arrived = 0, nil
	mu.Unlock()
	_, err = c.DrawNamespace(bg, "invoices", 1)
	var stale *StaleRevisionError
	if !errors.As(err, &stale) || stale.Got != 1 || stale.Previous != 2 {
		t.Errorf("answer with revision 1 after 2 was seen: got %v, want a *StaleRevisionError (got 1, previous 2)", err)
	}
}

// TestDrawSnowflakesLease: Snowflake draws carry the lease that made them,
// from a direct request and from the cache.
func TestDrawSnowflakesLease(t *testing.T) {
	srv := startServer(t, true)
	st := srv.node.Keeper().Status()
	want := LeaseToken{Datacenter: st.Lease.DatacenterID, Worker: st.Lease.WorkerID, FencingVersion: st.Lease.FencingVersion}
	if want.FencingVersion < 1 {
		t.Fatalf("node lease %+v: no fencing version", st.Lease)
	}
	layout := snowflake.DefaultLayout()
	for _, tc := range []struct {
		name string
		opts Options
		n    int
	}{
		{"direct", Options{}, 5},
		{"split over requests", Options{MaxCount: 2}, 5},
		{"cached", Options{Cache: CacheOptions{Snowflake: 10}}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t, srv.URL, tc.opts, newFakeClock())
			d, err := c.DrawSnowflakes(bg, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.IDs) != tc.n || d.Source != SourceSnowflake || d.Revision != 0 || !slices.Equal(d.Leases, []LeaseToken{want}) {
				t.Fatalf("got %d IDs from %q, revision %d, leases %v; want %d Snowflake IDs, no revision, leases [%+v]",
					len(d.IDs), d.Source, d.Revision, d.Leases, tc.n, want)
			}
			for _, id := range d.IDs {
				if p := layout.Decompose(snowflake.ID(id)); p.Datacenter != want.Datacenter || p.Worker != want.Worker {
					t.Errorf("ID %d: datacenter %d worker %d, but the lease says %d/%d", id, p.Datacenter, p.Worker, want.Datacenter, want.Worker)
				}
			}
		})
	}
	if _, err := newTestClient(t, srv.URL, Options{}, newFakeClock()).DrawSnowflakes(bg, 0); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("DrawSnowflakes(0): got %v, want ErrInvalidInput", err)
	}
}
