package client

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/internal/testserver"
)

// TestGeneratorBlocksReachTheAuditTrail: a node writes its audit trail to
// JSON lines; a Go generator holding a lease through the API reports its
// counts with its heartbeats and its release, the node's keeper with its
// own. The block records add up, per holder, to the IDs each handed out,
// and the API holder's acquire and release are there once each.
func TestGeneratorBlocksReachTheAuditTrail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	node := testserver.MustStart(t, testserver.Options{
		Tokens: brokerTokens,
		Keeper: allocator.KeeperSettings{TTL: 3 * time.Second, Heartbeat: 100 * time.Millisecond, WorkerIDs: &WorkerRange{Min: 0, Max: 0}},
		Audit: app.AuditConfig{Sink: "file:" + path,
			Settings: audit.RecorderSettings{FlushInterval: 10 * time.Millisecond, BlockInterval: 50 * time.Millisecond}},
	})
	g, err := NewGenerator(context.Background(), node.URL, GeneratorOptions{Token: leaseToken, Holder: "gen-audit",
		Workers: &WorkerRange{Min: 3, Max: 5}, TTL: 3 * time.Second, Heartbeat: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var genIDs, nodeIDs int64
	var buf []int64
	for range 6 {
		buf, err = g.NextN(buf[:0], 3000)
		if err != nil {
			t.Fatal(err)
		}
		genIDs += int64(len(buf))
		req, _ := http.NewRequest(http.MethodGet, node.URL+"/ids?count=250", nil)
		req.Header.Set("Authorization", "Bearer "+idsToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /ids: %s", resp.Status)
		}
		nodeIDs += 250
		time.Sleep(150 * time.Millisecond) // a heartbeat or two in between
	}
	if err := g.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := node.Close(ctx); err != nil { // releases the node's lease and flushes the trail
		t.Fatal(err)
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	apiHolder := "api:" + leaseOwner + "/gen-audit"
	blocks := map[string]int64{}
	kinds := map[string]int{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev audit.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if seen[ev.ID] {
			t.Errorf("event %s written twice", ev.ID)
		}
		seen[ev.ID] = true
		if ev.Kind == audit.KindBlock {
			blocks[ev.Holder] += ev.Count
		}
		if ev.Holder == apiHolder {
			kinds[string(ev.Kind)]++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if blocks[apiHolder] != genIDs {
		t.Errorf("the generator's block records add up to %d, want the %d IDs it issued (blocks %v)", blocks[apiHolder], genIDs, blocks)
	}
	nodeHolder := node.Keeper().Holder()
	if blocks[nodeHolder] != nodeIDs {
		t.Errorf("the node's block records add up to %d, want the %d IDs it served (blocks %v)", blocks[nodeHolder], nodeIDs, blocks)
	}
	if kinds["acquire"] != 1 || kinds["release"] != 1 || kinds["heartbeat"] < 3 {
		t.Errorf("the API holder's events: %v; want one acquire, one release and its heartbeats", kinds)
	}
	if st := node.Audit().Stats(); st.Dropped != 0 || !strings.HasPrefix(st.Sink, "file:") {
		t.Errorf("audit stats %+v: want nothing dropped, a file sink", st)
	}
}
