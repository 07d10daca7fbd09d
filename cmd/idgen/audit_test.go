package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/snowflake"
)

// TestAuditWho runs idgen audit who on every database: an ID of a held
// worker names its holder and fencing version, an ID of a worker never
// held says "no holder recorded", and bad input is a usage error.
func TestAuditWho(t *testing.T) {
	forEachDialect(t, func(t *testing.T, dsn string) {
		mustCLI(t, "migrate", "up", "--dsn", dsn)
		ctx := context.Background()
		store, err := stores.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		res, err := store.Claim(ctx, allocator.ClaimRequest{DatacenterID: 2, MinWorkerID: 6, MaxWorkerID: 6, Holder: "node-who",
			TTL: time.Hour, CeilingMS: time.Now().UnixMilli() + 60_000, MaxClockOffset: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		l := snowflake.DefaultLayout()
		at := res.DBNow.UnixMilli() - l.EpochMillis()
		held, err := l.Compose(snowflake.Parts{Timestamp: at, Datacenter: 2, Worker: 6, Sequence: 9})
		if err != nil {
			t.Fatal(err)
		}
		never, err := l.Compose(snowflake.Parts{Timestamp: at, Datacenter: 2, Worker: 7})
		if err != nil {
			t.Fatal(err)
		}

		out := mustCLI(t, "audit", "who", fmt.Sprint(held), "--dsn", dsn)
		for _, want := range []string{"node-who", fmt.Sprintf("fencing_version  %d", res.Lease.FencingVersion), "still held", "source           store"} {
			if !strings.Contains(out, want) {
				t.Errorf("who %d: got\n%s\nwant %q in it", held, out, want)
			}
		}
		out = mustCLI(t, "audit", "who", snowflake.EncodeID(never, snowflake.FormatBase62, l.Width()), "--format", "base62", "--dsn", dsn)
		if !strings.Contains(out, "no holder recorded") || strings.Contains(out, "node-who") {
			t.Errorf("who %d (worker 7, never held): got\n%s\nwant no holder recorded", never, out)
		}
		for _, args := range [][]string{
			{"audit", "who", "not-an-id", "--dsn", dsn},
			{"audit", "who", "--dsn", dsn},
			{"audit", "who", "1", "--audit-sink", "stdout", "--dsn", dsn},
			{"audit", "what"},
		} {
			if r := cli(t, nil, args...); r.code != 2 || r.stderr == "" {
				t.Errorf("idgen %q: got exit code %d, stderr %q; want 2 and a message", args, r.code, r.stderr)
			}
		}
	})
}

// TestServeAuditSinkFlags: a sink of no known form is a usage error naming
// the flag, and neither it nor --print-config shows a ClickHouse password.
func TestServeAuditSinkFlags(t *testing.T) {
	r := cli(t, nil, "serve", "--audit-sink", "kafka://u:pw-never-shown@host/x")
	if r.code != 2 || !strings.Contains(r.stderr, "--audit-sink") || strings.Contains(r.stderr, "pw-never-shown") {
		t.Errorf("serve --audit-sink kafka://…: got exit code %d, stderr %q; want 2 naming --audit-sink, no password", r.code, r.stderr)
	}
	r = cli(t, nil, "serve", "--print-config", "--audit-sink", "clickhouse://u:pw-never-shown@127.0.0.1:8123/idgen")
	if r.code != 0 || !strings.Contains(r.stdout, `audit-sink: "clickhouse://u:xxxxx@127.0.0.1:8123/idgen"`) || strings.Contains(r.stdout+r.stderr, "pw-never-shown") {
		t.Errorf("serve --print-config: got exit code %d, stdout %q; want the sink with its password masked", r.code, r.stdout)
	}
	// A buffer below the default batch lowers the batch, unless it is set.
	r = cli(t, nil, "serve", "--print-config", "--audit-sink", "stdout", "--audit-buffer", "40")
	if r.code != 0 || !strings.Contains(r.stdout, "audit-batch: 40 ") {
		t.Errorf("serve --print-config --audit-buffer 40: got exit code %d, stdout %q; want audit-batch: 40", r.code, r.stdout)
	}
	r = cli(t, nil, "serve", "--print-config", "--audit-sink", "stdout", "--audit-buffer", "40", "--audit-batch", "30")
	if r.code != 0 || !strings.Contains(r.stdout, "audit-batch: 30 ") {
		t.Errorf("serve --print-config --audit-buffer 40 --audit-batch 30: got exit code %d, stdout %q; want audit-batch: 30", r.code, r.stdout)
	}
}
