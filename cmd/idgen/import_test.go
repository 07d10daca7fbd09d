package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/peerimport"
	"github.com/idgen-project/idgen/internal/testserver"
)

// The source tables as Leaf and tinyid create them, in each dialect.
var sourceDDL = map[string][]string{
	"mysql": {
		"CREATE TABLE leaf_alloc (biz_tag varchar(128) NOT NULL DEFAULT '', max_id bigint(20) NOT NULL DEFAULT '1'," +
			" step int(11) NOT NULL, description varchar(256) DEFAULT NULL," +
			" update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, PRIMARY KEY (biz_tag)) ENGINE=InnoDB",
		"CREATE TABLE tiny_id_info (id bigint(20) unsigned NOT NULL AUTO_INCREMENT, biz_type varchar(63) NOT NULL DEFAULT ''," +
			" begin_id bigint(20) NOT NULL DEFAULT '0', max_id bigint(20) NOT NULL DEFAULT '0', step int(11) DEFAULT '0'," +
			" delta int(11) NOT NULL DEFAULT '1', remainder int(11) NOT NULL DEFAULT '0'," +
			" create_time timestamp NOT NULL DEFAULT '2010-01-01 00:00:00', update_time timestamp NOT NULL DEFAULT '2010-01-01 00:00:00'," +
			" version bigint(20) NOT NULL DEFAULT '0', PRIMARY KEY (id), UNIQUE KEY uniq_biz_type (biz_type)) ENGINE=InnoDB",
		"CREATE TABLE leaf_bad LIKE leaf_alloc",
	},
	"postgres": {
		"CREATE TABLE leaf_alloc (biz_tag varchar(128) NOT NULL DEFAULT '' PRIMARY KEY, max_id bigint NOT NULL DEFAULT 1," +
			" step integer NOT NULL, description varchar(256), update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP)",
		"CREATE TABLE tiny_id_info (id bigserial PRIMARY KEY, biz_type varchar(63) NOT NULL DEFAULT '' UNIQUE," +
			" begin_id bigint NOT NULL DEFAULT 0, max_id bigint NOT NULL DEFAULT 0, step integer DEFAULT 0," +
			" delta integer NOT NULL DEFAULT 1, remainder integer NOT NULL DEFAULT 0," +
			" create_time timestamp NOT NULL DEFAULT '2010-01-01 00:00:00', update_time timestamp NOT NULL DEFAULT '2010-01-01 00:00:00'," +
			" version bigint NOT NULL DEFAULT 0)",
		"CREATE TABLE leaf_bad (LIKE leaf_alloc INCLUDING ALL)",
	},
}

// The rows of the source tables; max_id is what the import must stay above.
var (
	leafRows = []struct {
		tag         string
		maxID, step int64
		description any
	}{
		{"order-ids", 5001, 1000, "orders"},
		{"user.ids", 1, 2000, nil}, // never used
		{"big_step", 123456789012, 100, nil},
		{"raised", 777, 10, nil},
	}
	tinyidRows = []struct {
		bizType                 string
		maxID                   int64
		step                    any
		delta, remainder, begin int64
	}{
		{"test", 100001, 100000, 1, 0, 1},
		{"coupon", 0, nil, 1, 0, 0}, // a NULL step
		{"test_odd", 200001, 100000, 2, 1, 1},
	}
)

// TestNamespacesImport imports Leaf's and tinyid's tables from PostgreSQL
// and MariaDB into idgen on the same database, and checks that the first
// IDs a node serves, through the drop-in routes, lie above every max_id.
func TestNamespacesImport(t *testing.T) {
	for _, dialect := range []string{"postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) { testNamespacesImport(t, dialect) })
	}
}

func testNamespacesImport(t *testing.T, dialect string) {
	ctx := context.Background()
	from := testserver.StoreDSN(t, dialect) // the source: a database of its own
	src, err := peerimport.Open(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	exec := func(stmt string, args ...any) {
		t.Helper()
		if dialect == "postgres" {
			stmt = dollars(stmt)
		}
		if _, err := src.ExecContext(ctx, stmt, args...); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	for _, stmt := range sourceDDL[dialect] {
		exec(stmt)
	}
	for _, r := range leafRows {
		exec("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)", r.tag, r.maxID, r.step, r.description)
	}
	for _, r := range tinyidRows {
		exec("INSERT INTO tiny_id_info (biz_type, begin_id, max_id, step, delta, remainder) VALUES (?, ?, ?, ?, ?, ?)",
			r.bizType, r.begin, r.maxID, r.step, r.delta, r.remainder)
	}
	exec("INSERT INTO leaf_bad (biz_tag, max_id, step) VALUES (?, ?, ?), (?, ?, ?)", "Bad Tag", 10, 10, "fine", 10, 10)

	dsn := testserver.StoreDSN(t, dialect)   // idgen's: another fresh database
	store := testserver.OpenStoreDSN(t, dsn) // migrated
	// "raised" exists already, below Leaf's max_id.
	pre, err := allocator.NamespaceSpec{Name: "raised", Start: new(int64(10))}.Namespace(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateNamespace(ctx, pre); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		t.Helper()
		nss, err := store.ListNamespaces(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ns := range nss {
			out = append(out, ns.Name)
		}
		return out
	}
	imp := func(args ...string) result {
		t.Helper()
		return cli(t, nil, append([]string{"namespaces", "import"}, append(args, "--from", from, "--dsn", dsn)...)...)
	}

	// A dry run changes nothing, and says what it would do.
	r := imp("leaf", "--dry-run", "--raise-existing")
	if r.code != 0 || !strings.Contains(r.stdout, "would create") || !strings.Contains(r.stdout, "would raise") {
		t.Fatalf("dry run: got code %d, stdout %q, stderr %q; want 0 and the plan", r.code, r.stdout, r.stderr)
	}
	if got := names(); strings.Join(got, ",") != "raised" {
		t.Fatalf("after the dry run: namespaces %v, want only raised", got)
	}

	// An existing namespace below its row stops the import, with nothing changed.
	r = imp("leaf")
	if r.code != 1 || !strings.Contains(r.stderr, `namespace "raised" exists with next ID 10, not above max_id 777`) {
		t.Fatalf("import over a lower namespace: got code %d, stderr %q; want 1 and the conflict", r.code, r.stderr)
	}
	if got := names(); strings.Join(got, ",") != "raised" {
		t.Fatalf("after the conflict: namespaces %v, want only raised", got)
	}
	r = imp("leaf", "--raise-existing")
	if r.code != 0 || !strings.Contains(r.stdout, "3 namespaces created, 1 raised") {
		t.Fatalf("import leaf: got code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// tinyid rows with a delta need --accept-delta; without, nothing is imported.
	r = imp("tinyid")
	if r.code != 1 || !strings.Contains(r.stderr, `biz_type "test_odd": delta 2`) {
		t.Fatalf("import tinyid with a delta: got code %d, stderr %q; want 1 and the row", r.code, r.stderr)
	}
	if _, err := store.GetNamespace(ctx, "test"); !errors.Is(err, allocator.ErrNamespaceNotFound) {
		t.Fatalf("namespace test after the refused import: got %v, want not found", err)
	}
	r = imp("tinyid", "--accept-delta")
	if r.code != 0 || !strings.Contains(r.stdout, "3 namespaces created") {
		t.Fatalf("import tinyid: got code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// Again: everything is there, above its row, and left as it is.
	r = imp("tinyid", "--accept-delta")
	if r.code != 0 || !strings.Contains(r.stdout, "0 namespaces created, 0 raised, 3 left as they were") {
		t.Fatalf("import tinyid again: got code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// A name idgen cannot use stops the import, naming it.
	r = imp("leaf", "--table", "leaf_bad")
	if r.code != 1 || !strings.Contains(r.stderr, `biz_tag "Bad Tag": not an idgen namespace name`) {
		t.Fatalf("import of a bad name: got code %d, stderr %q", r.code, r.stderr)
	}
	if _, err := store.GetNamespace(ctx, "fine"); !errors.Is(err, allocator.ErrNamespaceNotFound) {
		t.Fatalf("namespace fine after the refused import: got %v, want not found", err)
	}
	ns, err := store.GetNamespace(ctx, "coupon")
	if err != nil || ns.Step != allocator.DefaultStep || ns.MaxID != 0 {
		t.Fatalf("namespace coupon (NULL step, max_id 0): got %+v, %v; want step %d, next ID 1", ns, err, allocator.DefaultStep)
	}

	// The first IDs a node serves lie above every max_id.
	node := testserver.MustStart(t, testserver.Options{Store: store})
	get := func(path string) []int64 {
		t.Helper()
		resp, err := http.Get(node.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: got %d %q (%v), want 200", path, resp.StatusCode, body, err)
		}
		var ids []int64
		for _, f := range strings.Split(string(body), ",") {
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatalf("GET %s: %q is not a list of IDs", path, body)
			}
			ids = append(ids, id)
		}
		return ids
	}
	for _, r := range leafRows {
		got := get("/api/segment/get/" + r.tag)
		if got[0] != r.maxID+1 {
			t.Errorf("Leaf %s: first ID %d, want %d (max_id %d + 1)", r.tag, got[0], r.maxID+1, r.maxID)
		}
	}
	for _, r := range tinyidRows {
		got := get("/tinyid/id/nextIdSimple?bizType=" + r.bizType + "&batchSize=3")
		if len(got) != 3 || got[0] != r.maxID+1 || got[2] != r.maxID+3 {
			t.Errorf("tinyid %s: IDs %v, want %d to %d (above max_id %d)", r.bizType, got, r.maxID+1, r.maxID+3, r.maxID)
		}
	}
}

// dollars numbers the ? placeholders of stmt for PostgreSQL.
func dollars(stmt string) string {
	var b strings.Builder
	n := 0
	for _, c := range stmt {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

func TestNamespacesImportUsage(t *testing.T) {
	dir := t.TempDir()
	base := []string{"namespaces", "import"}
	dsn := "sqlite:" + dir + "/untouched.db"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no source", []string{"--from", "mysql://root@127.0.0.1:1/x", "--dsn", dsn}, "missing the source"},
		{"unknown source", []string{"snowflake", "--from", "mysql://root@127.0.0.1:1/x", "--dsn", dsn}, `unknown source: "snowflake"`},
		{"two sources", []string{"leaf", "tinyid", "--from", "mysql://root@127.0.0.1:1/x", "--dsn", dsn}, `unexpected argument "tinyid"`},
		{"no --from", []string{"leaf", "--dsn", dsn}, "missing --from"},
		{"sqlite --from", []string{"leaf", "--from", "sqlite:leaf.db", "--dsn", dsn}, "invalid --from"},
		{"negative gap", []string{"leaf", "--from", "mysql://root@127.0.0.1:1/x", "--gap", "-1", "--dsn", dsn}, "invalid --gap -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, nil, append(base, tc.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) || len(lines(r.stderr)) != 2 {
				t.Fatalf("got code %d, stderr %q; want 2 and %q on one line, then the hint", r.code, r.stderr, tc.want)
			}
		})
	}
	// An unreachable source: a one-line error without the password.
	r := cli(t, nil, "namespaces", "import", "leaf", "--dsn", dsn,
		"--from", "postgres://leaf:hunter2-source-password@127.0.0.1:1/leaf?sslmode=disable&connect_timeout=2")
	if r.code != 1 || strings.Contains(r.stderr, "hunter2-source-password") || !strings.Contains(r.stderr, "open the source") {
		t.Fatalf("unreachable source: got code %d, stderr %q; want 1, the cause, no password", r.code, r.stderr)
	}
}
