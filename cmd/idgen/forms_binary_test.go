package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodeJS returns the path of node, failing the test where the environment
// says every tool must be there (IDGEN_TEST_REQUIRE_DB=1) and skipping it
// otherwise.
func nodeJS(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("IDGEN_TEST_REQUIRE_DB") == "1" {
			t.Fatalf("node (Node.js) is not on PATH: %v", err)
		}
		t.Skip("node (Node.js) is not on PATH; install it to check IDs as JavaScript numbers")
	}
	return p
}

// jsCheck reads a GET /ids answer on stdin and fails unless every ID, read
// as a JSON number (as a JSON stack that parses numbers into doubles does),
// is a safe integer equal to the decimal string idgen sent.
const jsCheck = `
let s = "";
process.stdin.on("data", (b) => (s += b));
process.stdin.on("end", () => {
  const ids = JSON.parse(s).ids;
  const nums = JSON.parse("[" + ids.join(",") + "]");
  let bad = 0;
  ids.forEach((id, i) => {
    if (!Number.isSafeInteger(nums[i]) || String(nums[i]) !== id || BigInt(nums[i]) !== BigInt(id)) bad++;
  });
  console.log(ids.length + " " + bad);
});
`

// TestJS53Binary runs the idgen binary on the js53 preset: its IDs are
// exact JavaScript numbers, GET /ids/compose and idgen compose agree with
// GET /ids/{id} and idgen parse at the bounds, and a restart on another
// layout is refused.
func TestJS53Binary(t *testing.T) {
	nodeBin := nodeJS(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "idgen.db")
	p := startBinary(t, bin, dir, nil, "--dsn", dsn, "--layout", "js53")
	n := p.node()
	n.waitReady()

	for round := range 3 {
		code, _, body := n.get("/ids?count=1000")
		if code != http.StatusOK {
			t.Fatalf("GET /ids?count=1000: status %d: %s", code, body)
		}
		cmd := exec.Command(nodeBin, "-e", jsCheck)
		cmd.Stdin = strings.NewReader(string(body))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node: %v", err)
		}
		if got := strings.TrimSpace(string(out)); got != "1000 0" {
			t.Fatalf("round %d: node read %q (IDs, unsafe ones), want 1000 IDs and none unsafe", round, got)
		}
	}

	at := "2026-11-27T12:34:56.789Z"
	var composed struct{ Time, First, Last string }
	n.getJSON("/ids/compose?time="+url.QueryEscape(at), http.StatusOK, &composed)
	cli := func(args ...string) map[string]string {
		code, stdout, stderr := runBinary(t, bin, dir, nil, args...)
		if code != 0 {
			t.Fatalf("idgen %q: exit code %d: %s", args, code, stderr)
		}
		m := map[string]string{}
		for _, l := range lines(stdout) {
			k, v, _ := strings.Cut(l, " ")
			m[k] = strings.TrimSpace(v)
		}
		return m
	}
	c := cli("compose", "--time", at, "--layout", "js53")
	if c["first"] != composed.First || c["last"] != composed.Last || composed.Time != at {
		t.Errorf("idgen compose: got %s..%s, GET /ids/compose %s..%s at %s; want the same", c["first"], c["last"], composed.First, composed.Last, composed.Time)
	}
	// js53 is 41/0/5/7: the last ID of a millisecond has worker 31 and sequence 127.
	for _, b := range []struct{ id, worker, seq string }{{composed.First, "0", "0"}, {composed.Last, "31", "127"}} {
		p := cli("parse", b.id, "--layout", "js53")
		var parsed struct {
			Time             string
			Worker, Sequence int64
		}
		n.getJSON("/ids/"+b.id, http.StatusOK, &parsed)
		if p["time"] != at || p["worker"] != b.worker || p["sequence"] != b.seq ||
			parsed.Time != at || fmt.Sprint(parsed.Worker) != b.worker || fmt.Sprint(parsed.Sequence) != b.seq {
			t.Errorf("bound %s: idgen parse %v, GET /ids/%s %+v; want %s, worker %s, sequence %s", b.id, p, b.id, parsed, at, b.worker, b.seq)
		}
	}

	if code := p.terminate(); code != 0 {
		t.Fatalf("idgen exited %d after SIGTERM\n%s", code, p.logs)
	}
	code, _, stderr := runBinaryBounded(t, time.Minute, bin, dir, nil, "serve", "--listen", "127.0.0.1:0", "--dsn", dsn, "--layout", "classic")
	if code != 1 || !strings.Contains(stderr, "layout differs") || !strings.Contains(stderr, "sequence bits 12 != 7") {
		t.Errorf("serve --layout classic on a js53 database: got exit code %d, stderr %q; want 1 and the layout mismatch", code, stderr)
	}
}
