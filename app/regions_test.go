package app_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/snowflake"
)

// region is one region of TestTwoRegions: its own database, its own
// datacenter ID, and the offset its namespace "orders" interleaves with.
type region struct {
	name       string
	dsn        string
	datacenter int64
	offset     int64
}

// drawnIDs are the IDs one node handed out.
type drawnIDs struct {
	region    string
	segment   [][]int64 // each draw's segment IDs, in the order handed out
	snowflake []int64
}

// TestTwoRegions runs two regions as docs/regions.md describes them: two
// databases that never talk to each other, each with two nodes of its own
// datacenter ID, and the namespace "orders" in both with stride 2 and the
// region's offset. All four nodes draw segment IDs (through the core and
// over HTTP) and Snowflake IDs at once; then every node stops, returning
// its tails, and one node per region starts again and draws more. No ID
// may appear twice across both regions, every segment ID of a region must
// be ≡ its offset (mod 2), and each draw's IDs increase by the stride.
func TestTwoRegions(t *testing.T) {
	const (
		nodesPerRegion = 2
		rounds         = 150 // draws of each kind per node
		maxCount       = 40
	)
	dir := t.TempDir()
	regions := []region{
		{"east", "sqlite:" + filepath.Join(dir, "east.db"), 0, 0},
		{"west", "sqlite:" + filepath.Join(dir, "west.db"), 1, 1},
	}
	ctx := t.Context()

	open := func(r region, node int) *app.App {
		t.Helper()
		a, err := app.Open(ctx, app.Config{
			DSN: r.dsn, Migrate: true, Listen: "127.0.0.1:0",
			Keeper:   allocator.KeeperSettings{DatacenterID: r.datacenter, Holder: fmt.Sprintf("%s-%d", r.name, node)},
			Segments: allocator.SegmentSettings{RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond},
		})
		if err != nil {
			t.Fatalf("open %s node %d: %v", r.name, node, err)
		}
		return a
	}

	var nodes []*app.App
	var nodeRegion []region
	for _, r := range regions {
		for i := range nodesPerRegion {
			a := open(r, i)
			nodes = append(nodes, a)
			nodeRegion = append(nodeRegion, r)
			if i > 0 {
				continue
			}
			// The same namespace in each region's database: stride 2, the
			// region's offset, a small step so that ranges switch often.
			stride, offset, step := int64(2), r.offset, int64(50)
			ns, err := allocator.NamespaceSpec{Name: "orders", Step: &step, Stride: &stride, Offset: &offset}.Namespace(0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Store().CreateNamespace(ctx, ns); err != nil {
				t.Fatalf("create orders in %s: %v", r.name, err)
			}
		}
	}

	drawAll := func(nodes []*app.App, regs []region, rounds int) []drawnIDs {
		out := make([]drawnIDs, len(nodes))
		errs := make(chan error, len(nodes))
		var wg sync.WaitGroup
		for i, a := range nodes {
			wg.Go(func() {
				got := &out[i]
				got.region = regs[i].name
				var d idgen.Drawn
				for round := range rounds {
					n := 1 + (round*7+i)%maxCount
					// Segment IDs through the core, as gRPC draws them.
					if err := a.Service().Draw(ctx, idgen.Caller{}, idgen.DrawRequest{Namespace: "orders", Count: n}, &d); err != nil {
						errs <- fmt.Errorf("%s node %d: segment draw: %w", regs[i].name, i, err)
						return
					}
					if d.Source != idgen.SourceSegment {
						errs <- fmt.Errorf("%s node %d: got source %v, want segment", regs[i].name, i, d.Source)
						return
					}
					got.segment = append(got.segment, slices.Clone(d.IDs))
					// Segment IDs over HTTP.
					ids, err := httpIDs(a, fmt.Sprintf("/ids?namespace=orders&count=%d", n))
					if err != nil {
						errs <- fmt.Errorf("%s node %d: %w", regs[i].name, i, err)
						return
					}
					got.segment = append(got.segment, ids)
					// Snowflake IDs.
					if err := a.Service().Draw(ctx, idgen.Caller{}, idgen.DrawRequest{Count: n}, &d); err != nil {
						errs <- fmt.Errorf("%s node %d: snowflake draw: %w", regs[i].name, i, err)
						return
					}
					got.snowflake = append(got.snowflake, d.IDs...)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		return out
	}

	all := drawAll(nodes, nodeRegion, rounds)
	for i, a := range nodes {
		// Close returns each node's unused tail to its region's database.
		if err := a.Close(ctx); err != nil {
			t.Errorf("close %s node: %v", nodeRegion[i].name, err)
		}
	}
	// One node per region again: it goes on after the tails returned.
	var again []*app.App
	for _, r := range regions {
		again = append(again, open(r, 9))
	}
	all = append(all, drawAll(again, regions, rounds/3)...)
	for i, a := range again {
		if err := a.Close(ctx); err != nil {
			t.Errorf("close %s node: %v", regions[i].name, err)
		}
	}

	// Every ID handed out, with where it came from.
	seen := map[int64]string{}
	dupes := 0
	layout := snowflake.DefaultLayout()
	count := map[string]int{}
	for _, node := range all {
		r := regionOf(regions, node.region)
		for _, draw := range node.segment {
			for j, id := range draw {
				if id%2 != r.offset {
					t.Fatalf("%s: segment ID %d ≡ %d (mod 2), want ≡ %d", r.name, id, id%2, r.offset)
				}
				if j > 0 && id <= draw[j-1] {
					t.Fatalf("%s: segment draw %v not increasing", r.name, draw)
				}
				if where, ok := seen[id]; ok {
					dupes++
					t.Errorf("ID %d handed out twice: by %s and by %s (segment)", id, where, r.name)
				}
				seen[id] = r.name + " segment"
				count[r.name+" segment"]++
			}
		}
		for _, id := range node.snowflake {
			if dc := layout.Decompose(snowflake.ID(id)).Datacenter; dc != r.datacenter {
				t.Fatalf("%s: Snowflake ID %d has datacenter %d, want %d", r.name, id, dc, r.datacenter)
			}
			if where, ok := seen[id]; ok {
				dupes++
				t.Errorf("ID %d handed out twice: by %s and by %s (snowflake)", id, where, r.name)
			}
			seen[id] = r.name + " snowflake"
			count[r.name+" snowflake"]++
		}
	}
	for _, k := range slices.Sorted(maps.Keys(count)) {
		t.Logf("%-16s %6d IDs", k, count[k])
	}
	t.Logf("%d IDs in all, %d duplicates", len(seen), dupes)
	for _, r := range regions {
		if count[r.name+" segment"] == 0 || count[r.name+" snowflake"] == 0 {
			t.Errorf("%s: got %d segment and %d Snowflake IDs, want some of each", r.name, count[r.name+" segment"], count[r.name+" snowflake"])
		}
	}
}

func regionOf(rs []region, name string) region {
	for _, r := range rs {
		if r.name == name {
			return r
		}
	}
	panic("unknown region " + name)
}

// httpIDs draws through a's HTTP handler, in process, and returns the IDs
// of the answer.
func httpIDs(a *app.App, target string) ([]int64, error) {
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
	if rec.Code != 200 {
		return nil, fmt.Errorf("GET %s: status %d, body %s", target, rec.Code, rec.Body.String())
	}
	var body struct {
		IDs    []string `json:"ids"`
		Source string   `json:"source"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		return nil, fmt.Errorf("GET %s: %w", target, err)
	}
	if body.Source != "segment" {
		return nil, fmt.Errorf("GET %s: source %q, want segment", target, body.Source)
	}
	ids := make([]int64, len(body.IDs))
	for i, s := range body.IDs {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("GET %s: ID %q: %w", target, s, err)
		}
		ids[i] = v
	}
	return ids, nil
}
