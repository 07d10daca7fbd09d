//go:build chaos

package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/testkit"
)

// database is what one scenario runs on: a fresh schema (PostgreSQL) or
// database (MySQL) on a shared server, or a fresh SQLite file in the
// scenario's temporary directory, which every node of the scenario opens
// (several processes on one file, on one host: WAL and BEGIN IMMEDIATE
// serialise them). A SQLite database has no server: the scenarios that
// proxy, cut or restart the database server (hostPort, withHost,
// bounceServer) do not apply to it; the generator scenarios fault the
// nodes' lease API and the generators, never the database, so they do.
type database struct {
	name string // "postgres", "mysql" or "sqlite"
	dsn  string
}

func freshDatabase(t *testing.T, name string) database {
	t.Helper()
	switch name {
	case "postgres":
		return database{name: name, dsn: testkit.Postgres(t)}
	case "mysql":
		return database{name: name, dsn: testkit.MySQL(t)}
	case "sqlite":
		return database{name: name, dsn: testkit.SQLite(t)}
	}
	t.Fatalf("unknown database %q", name)
	return database{}
}

// hostPort returns the server address of a DSN.
func hostPort(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("DSN does not parse")
	}
	if _, _, err := net.SplitHostPort(u.Host); err == nil {
		return u.Host
	}
	port := map[string]string{"postgres": "5432", "postgresql": "5432", "mysql": "3306"}[u.Scheme]
	return net.JoinHostPort(u.Hostname(), port)
}

// withHost returns dsn with its server address replaced by addr.
func withHost(t testing.TB, dsn, addr string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("DSN does not parse")
	}
	u.Host = addr
	return u.String()
}

// migrate applies the migrations with `idgen migrate up`.
func migrate(t testing.TB, bin, dsn string) {
	t.Helper()
	if out, err := runIdgen(t, bin, "migrate", "up", "--dsn", dsn); err != nil {
		t.Fatalf("idgen migrate up: %v\n%s", err, out)
	}
}

// createNamespace creates a namespace with `idgen namespaces create`.
func createNamespace(t testing.TB, bin, dsn, name string, args ...string) {
	t.Helper()
	all := append([]string{"namespaces", "create", name}, args...)
	all = append(all, "--dsn", dsn)
	if out, err := runIdgen(t, bin, all...); err != nil {
		t.Fatalf("idgen namespaces create %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// openStore opens the store of dsn for the harness's own reads.
func openStore(t testing.TB, dsn string) stores.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := stores.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	return s
}

// readHistory reads lease_events and the namespaces' max_id after a run.
func readHistory(t testing.TB, dsn string) ([]allocator.LeaseEvent, map[string]int64) {
	t.Helper()
	s := openStore(t, dsn)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var events []allocator.LeaseEvent
	var after int64
	for {
		page, err := s.ListLeaseEvents(ctx, allocator.LeaseEventFilter{AfterID: after, Limit: 1000})
		if err != nil {
			t.Fatalf("list lease events: %v", err)
		}
		events = append(events, page...)
		if len(page) < 1000 {
			break
		}
		after = page[len(page)-1].ID
	}
	nss, err := s.ListNamespaces(ctx)
	if err != nil {
		t.Fatalf("list namespaces: %v", err)
	}
	maxIDs := map[string]int64{}
	for _, ns := range nss {
		maxIDs[ns.Name] = ns.MaxID
	}
	return events, maxIDs
}

// toxicProxy is an in-process toxiproxy in front of a database server.
type toxicProxy struct {
	p    *toxiproxy.Proxy
	addr string
}

func newToxicProxy(t testing.TB, name, upstream string) *toxicProxy {
	t.Helper()
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(server, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("toxiproxy %s: %v", name, err)
	}
	t.Cleanup(p.Stop)
	return &toxicProxy{p: p, addr: p.Listen}
}

// add adds a toxic; stream is "upstream" (to the database) or "downstream".
func (tp *toxicProxy) add(t testing.TB, name, typ, stream string, attrs string) {
	t.Helper()
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)
	if _, err := tp.p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		t.Fatalf("add toxic %s: %v", js, err)
	}
}

func (tp *toxicProxy) remove(t testing.TB, name string) {
	t.Helper()
	if err := tp.p.Toxics.RemoveToxic(context.Background(), name); err != nil {
		t.Fatalf("remove toxic %s: %v", name, err)
	}
}

// ---- the shared database servers (scenario db-restart) ----

// serverDSN returns the server DSN of the environment for db.
func serverDSN(db string) string {
	if db == "postgres" {
		return os.Getenv(testkit.EnvPostgres)
	}
	return os.Getenv(testkit.EnvMySQL)
}

// pingServer reports whether the server of db answers a fresh connection.
func pingServer(ctx context.Context, db string) error {
	dsn := serverDSN(db)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if db == "postgres" {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		return conn.Ping(ctx)
	}
	conn, err := openMySQLServer(dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.PingContext(ctx)
}

// openMySQLServer connects to the server a mysql:// URL names.
func openMySQLServer(dsn string) (*sql.DB, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, errors.New("mysql DSN does not parse")
	}
	cfg := gomysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", u.Host
	if u.Port() == "" {
		cfg.Addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Timeout = 2 * time.Second
	connector, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(connector), nil
}

// waitServer waits until the server answers and returns when it did.
func waitServer(db string, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		err := pingServer(context.Background(), db)
		if err == nil {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s did not answer within %s: %w", db, timeout, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// localServer fails t unless the server of db runs on this machine, where
// the harness can restart it.
func localServer(t testing.TB, db string) {
	t.Helper()
	host, _, _ := net.SplitHostPort(hostPort(t, serverDSN(db)))
	if host != "127.0.0.1" && host != "localhost" && host != "::1" {
		t.Fatalf("%s server at %s is not local: the db-restart scenario restarts it on this machine", db, host)
	}
}

// postgresCluster returns the Debian cluster version (the newest one).
func postgresCluster(t testing.TB) string {
	t.Helper()
	entries, err := os.ReadDir("/etc/postgresql")
	if err != nil || len(entries) == 0 {
		t.Fatalf("no PostgreSQL cluster under /etc/postgresql: %v", err)
	}
	var versions []string
	for _, e := range entries {
		versions = append(versions, e.Name())
	}
	slices.SortFunc(versions, func(a, b string) int {
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		return x - y
	})
	return versions[len(versions)-1]
}

func runCmd(timeout time.Duration, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// bounceServer stops the database server of db the way an operator would,
// keeps it down for hold, and starts it again. With no hold, PostgreSQL is
// restarted with pg_ctlcluster restart -m fast.
func bounceServer(t testing.TB, db string, hold time.Duration) error {
	t.Helper()
	if db == "postgres" {
		v := postgresCluster(t)
		if hold == 0 {
			return runCmd(2*time.Minute, "pg_ctlcluster", "--skip-systemctl-redirect", v, "main", "restart", "-m", "fast")
		}
		if err := runCmd(2*time.Minute, "pg_ctlcluster", "--skip-systemctl-redirect", v, "main", "stop", "-m", "fast"); err != nil {
			return err
		}
		time.Sleep(hold)
		return runCmd(2*time.Minute, "pg_ctlcluster", "--skip-systemctl-redirect", v, "main", "start")
	}
	if err := stopMariaDB(); err != nil {
		return err
	}
	time.Sleep(hold)
	return startMariaDB()
}

// stopMariaDB stops the server process named by the server's own pid file
// and waits until it is gone.
func stopMariaDB() error {
	conn, err := openMySQLServer(serverDSN("mysql"))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var pidFile string
	if err := conn.QueryRowContext(ctx, "SELECT @@pid_file").Scan(&pidFile); err != nil {
		return fmt.Errorf("read pid_file: %w", err)
	}
	if !filepath.IsAbs(pidFile) {
		var dataDir string
		if err := conn.QueryRowContext(ctx, "SELECT @@datadir").Scan(&dataDir); err != nil {
			return fmt.Errorf("read datadir: %w", err)
		}
		pidFile = filepath.Join(dataDir, pidFile)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return fmt.Errorf("read %s: %w", pidFile, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("%s holds no pid: %q", pidFile, b)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop mariadbd %d: %w", pid, err)
	}
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
	}
	return fmt.Errorf("mariadbd %d still runs 90s after SIGTERM", pid)
}

// startMariaDB starts mariadbd as COMMON.md and .ci/run do.
func startMariaDB() error {
	if err := os.MkdirAll("/run/mysqld", 0o755); err == nil {
		_ = runCmd(10*time.Second, "chown", "mysql:mysql", "/run/mysqld")
	}
	return runCmd(30*time.Second, "start-stop-daemon", "--start", "--oknodo", "--background", "--exec", "/usr/sbin/mariadbd")
}

// ensureServer starts the server of db if it does not answer, and waits
// for it: the cleanup of the db-restart scenario.
func ensureServer(t testing.TB, db string) {
	t.Helper()
	if pingServer(context.Background(), db) == nil {
		return
	}
	var err error
	if db == "postgres" {
		err = runCmd(2*time.Minute, "pg_ctlcluster", "--skip-systemctl-redirect", postgresCluster(t), "main", "start")
	} else {
		err = startMariaDB()
	}
	if err != nil {
		t.Errorf("start %s again: %v", db, err)
	}
	if _, err := waitServer(db, 60*time.Second); err != nil {
		t.Errorf("%s is not running after the scenario: %v", db, err)
	}
}
