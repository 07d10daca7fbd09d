// Databases: Postgres, MySQL and SQLite each return the DSN of a fresh, empty
// schema, database or file of a test's own; see the package doc.

package testkit

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/testcontainers/testcontainers-go"
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"
)

// The environment variables the database fixtures read.
const (
	// EnvPostgres names a PostgreSQL server: postgres://user:pass@host:port/db?sslmode=disable.
	EnvPostgres = "IDGEN_TEST_POSTGRES_DSN"
	// EnvMySQL names a MySQL or MariaDB server: mysql://user:pass@host:port/db.
	EnvMySQL = "IDGEN_TEST_MYSQL_DSN"
	// EnvClickHouse names a ClickHouse server's HTTP interface, for the
	// audit trail's tests: http://127.0.0.1:8123.
	EnvClickHouse = "IDGEN_TEST_CLICKHOUSE_URL"
	// EnvPostgresImage names the image of the PostgreSQL container started
	// when EnvPostgres is not set (default postgres:15).
	EnvPostgresImage = "IDGEN_TEST_POSTGRES_IMAGE"
	// EnvMySQLImage names the image of the MySQL container started when
	// EnvMySQL is not set (default mysql:8).
	EnvMySQLImage = "IDGEN_TEST_MYSQL_IMAGE"
)

// errNoDocker: no container could be had because no Docker engine
// answered. When one answers and the container does not start (its image
// cannot be pulled, say), the error is a *containerError.
var errNoDocker = errors.New("no Docker engine answering")

// containerError is the failure of a container to start on an engine that
// answered.
type containerError struct {
	image string
	err   error
}

func (e *containerError) Error() string {
	return "the Docker engine answered, but the " + e.image + " container did not start: " + e.err.Error()
}

func (e *containerError) Unwrap() error { return e.err }

// The official images, started when no DSN and no image is set.
const (
	defaultPostgresImage = "postgres:15"
	defaultMySQLImage    = "mysql:8"
)

// Time limits: starting a container may pull its image; a server's first
// start initialises its data directory (MySQL 8's takes tens of seconds);
// creating or dropping a schema is quick.
const (
	containerStartTimeout = 5 * time.Minute
	serverReadyTimeout    = 3 * time.Minute
	setupTimeout          = 30 * time.Second
)

// mysqlReady matches the line MySQL 8 and MariaDB log once the server that
// listens on the network is up ("Version: '8.4.3'  socket: '…'  port: 3306
// MySQL Community Server - GPL.", "Version: '10.11.6-MariaDB-0+deb12u1'
// socket: '…'  port: 3306  Debian 12"). The official images first run a
// server for their initialisation scripts without networking, which logs
// port 0, so the line cannot match too early.
const mysqlReady = `Version: '[^']*'\s+socket: '[^']*'\s+port: 3306\s`

// The containers are the one piece of process-wide state of the database fixtures: each is
// started at most once per test process, the first time a test needs it, and
// every later test reuses it (starting a server per test would take seconds
// each). sync.OnceValues keeps the outcome, success or error, so a process
// without Docker tries only once. Nothing else in the package is mutable.
var (
	postgresContainer = sync.OnceValues(startPostgres)
	mysqlContainer    = sync.OnceValues(startMySQL)
)

// Postgres returns the DSN of a new, empty PostgreSQL schema, selected with
// search_path, which is dropped (with everything in it) when tb ends.
func Postgres(tb testing.TB) string {
	tb.Helper()
	server := serverDSN(tb, "postgres", EnvPostgres, "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", postgresContainer)
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		tb.Fatalf("testdb: %s is not a postgres:// URL", EnvPostgres)
	}
	schema := dbName(tb)
	exec := func(ctx context.Context, stmt string) error {
		conn, err := pgx.Connect(ctx, server)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, stmt)
		return err
	}
	ident := pgx.Identifier{schema}.Sanitize()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		tb.Fatalf("testdb: create schema %s on %s: %v", schema, u.Redacted(), err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := exec(ctx, "DROP SCHEMA IF EXISTS "+ident+" CASCADE"); err != nil {
			tb.Errorf("testdb: drop schema %s on %s: %v", schema, u.Redacted(), err)
		}
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// MySQL returns the DSN of a new, empty MySQL/MariaDB database, which is
// dropped when tb ends.
func MySQL(tb testing.TB) string {
	tb.Helper()
	server := serverDSN(tb, "mysql", EnvMySQL, "mysql://root@127.0.0.1:3306/test", mysqlContainer)
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "mysql" || u.Host == "" {
		tb.Fatalf("testdb: %s is not a mysql:// URL", EnvMySQL)
	}
	db, err := openMySQL(u)
	if err != nil {
		tb.Fatalf("testdb: %s: %v", u.Redacted(), err)
	}
	defer db.Close()
	name := dbName(tb)
	ident := "`" + name + "`" // dbName returns [a-z0-9_] only
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+ident+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		tb.Fatalf("testdb: create database %s on %s: %v", name, u.Redacted(), err)
	}
	tb.Cleanup(func() {
		db, err := openMySQL(u)
		if err != nil {
			tb.Errorf("testdb: %s: %v", u.Redacted(), err)
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+ident); err != nil {
			tb.Errorf("testdb: drop database %s on %s: %v", name, u.Redacted(), err)
		}
	})
	u.Path = "/" + name
	u.RawPath = ""
	return u.String()
}

// SQLite returns the DSN of a new SQLite database file in tb's temporary
// directory, which the testing package removes when tb ends. The file is
// created by the first connection.
func SQLite(tb testing.TB) string {
	tb.Helper()
	return "sqlite:" + filepath.Join(tb.TempDir(), dbName(tb)+".db")
}

// ClickHouse returns the ClickHouse server EnvClickHouse names; without
// one tb is skipped, or fails when EnvRequire is 1 (no container is
// started: .ci/run installs and starts a server).
func ClickHouse(tb testing.TB) *url.URL {
	tb.Helper()
	raw := os.Getenv(EnvClickHouse)
	if raw == "" {
		msg := "testdb: no ClickHouse server for this test: set " + EnvClickHouse + " (e.g. http://127.0.0.1:8123; .ci/run installs and starts one)"
		MissingServer(tb, msg, func() { ReportSkip(tb, "clickhouse", EnvClickHouse+" not set") })
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		tb.Fatalf("testdb: %s does not parse as http://host:port", EnvClickHouse)
	}
	return u
}

// serverDSN returns the DSN of the server of db ("postgres" or "mysql") for
// tb: the one the environment variable env names, else the process's
// container, else tb is skipped or fails (see unavailable, which shows
// example as a value for env).
func serverDSN(tb testing.TB, db, env, example string, container func() (string, error)) string {
	tb.Helper()
	if dsn := os.Getenv(env); dsn != "" {
		return dsn
	}
	dsn, err := container()
	if err != nil {
		dbUnavailable(tb, db, env, example, err)
	}
	return dsn
}

// dbUnavailable skips tb, reporting the skip (report), or fails it when
// EnvRequire is 1 (Server), saying how to give the tests a
// database. db is "postgres" or "mysql".
func dbUnavailable(tb testing.TB, db, env, example string, cause error) {
	tb.Helper()
	what := map[string]string{"postgres": "PostgreSQL", "mysql": "MySQL"}[db]
	msg := fmt.Sprintf("testdb: no %s server for this test: set %s (e.g. %s) or run a Docker engine "+
		"so that testcontainers-go can start one (%v)", what, env, example, cause)
	MissingServer(tb, msg, func() { ReportSkip(tb, db, skipReason(cause)) })
}

// skipReason says in one line why a database test was skipped, for the
// report (which make test summarises): no Docker engine, or an engine that
// answered and could not pull the image, or whose container did not start,
// with the engine's own words.
func skipReason(cause error) string {
	var ce *containerError
	switch {
	case errors.Is(cause, errNoDocker):
		return errNoDocker.Error()
	case errors.As(cause, &ce):
		msg := ce.err.Error()
		// testcontainers wraps the engine's answer in its own steps
		// ("run mysql: generic container: create container: …").
		if _, daemon, ok := strings.Cut(msg, "Error response from daemon: "); ok {
			msg = daemon
		}
		for _, pull := range []string{"registry", "pull", "manifest", "No such image"} {
			if strings.Contains(msg, pull) {
				return "the Docker engine answered, but could not pull the image " + ce.image + ": " + msg
			}
		}
		return ce.Error()
	}
	return cause.Error()
}

// dbName returns a fresh random name for a schema or database, starting with
// a short form of the test's name so that leftovers can be traced to a test:
// idgen_<test>_<16 hex digits>, at most 48 characters of [a-z0-9_].
func dbName(tb testing.TB) string {
	tb.Helper()
	return "idgen_" + UniqueName(tb)
}

// openMySQL connects to the server named by a mysql:// URL.
func openMySQL(u *url.URL) (*sql.DB, error) {
	cfg, err := gomysql.ParseDSN("tcp(" + hostPort(u.Host, "3306") + ")/?" + u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("bad parameters: %w", err)
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	connector, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(connector), nil
}

// hostPort adds port to host when host has none.
func hostPort(host, port string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), port)
}

// dockerAvailable reports whether a Docker engine answers. testcontainers
// may panic when none is configured; that counts as no.
func dockerAvailable(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errNoDocker, r)
		}
	}()
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return fmt.Errorf("%w: %w", errNoDocker, err)
	}
	defer provider.Close()
	if err := provider.Health(ctx); err != nil {
		return fmt.Errorf("%w: %w", errNoDocker, err)
	}
	return nil
}

// containerPassword returns a fresh random password for a container's
// database account: "tc" and 32 hex digits, which no text idgen prints can
// contain.
func containerPassword() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random password: %w", err)
	}
	return "tc" + hex.EncodeToString(b[:]), nil
}

// image returns the image named by the environment variable env, or def.
func image(env, def string) string {
	if v := strings.TrimSpace(os.Getenv(env)); v != "" {
		return v
	}
	return def
}

// startContainer starts the process's container of db ("postgres" or
// "mysql") and returns its DSN: run starts the image env names (or def)
// with an account of the password given, and dsn returns the DSN of the
// started server. A container that fails to start, or to give its address,
// is removed.
func startContainer[C testcontainers.Container](db, env, def string,
	run func(ctx context.Context, img, password string) (C, error),
	dsn func(ctx context.Context, c C, password string) (string, error),
) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), containerStartTimeout)
	defer cancel()
	if err := dockerAvailable(ctx); err != nil {
		return "", err
	}
	img := image(env, def)
	password, err := containerPassword()
	if err != nil {
		return "", err
	}
	c, err := run(ctx, img, password)
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return "", &containerError{image: img, err: err}
	}
	addr, err := dsn(ctx, c, password)
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return "", &containerError{image: img, err: fmt.Errorf("no address: %w", err)}
	}
	_ = Report(EventContainer, db, img)
	return addr, nil
}

// startPostgres starts the process's PostgreSQL container and returns its DSN.
func startPostgres() (string, error) {
	return startContainer("postgres", EnvPostgresImage, defaultPostgresImage,
		func(ctx context.Context, img, password string) (*tcpostgres.PostgresContainer, error) {
			return tcpostgres.Run(ctx, img,
				tcpostgres.WithDatabase("idgen"),
				tcpostgres.WithUsername("postgres"),
				tcpostgres.WithPassword(password),
				// The server's own settings, not the module's fsync=off: the
				// tests run against what a deployment runs.
				testcontainers.WithCmd("postgres"),
				// Ready when the server started after the initialisation
				// says so (the one the initialisation runs says it first)
				// and the published port answers.
				testcontainers.WithWaitStrategyAndDeadline(serverReadyTimeout,
					wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
					wait.ForListeningPort("5432/tcp"),
				),
			)
		},
		func(ctx context.Context, c *tcpostgres.PostgresContainer, _ string) (string, error) {
			return c.ConnectionString(ctx, "sslmode=disable")
		})
}

// startMySQL starts the process's MySQL container and returns its DSN.
func startMySQL() (string, error) {
	return startContainer("mysql", EnvMySQLImage, defaultMySQLImage,
		func(ctx context.Context, img, password string) (*tcmysql.MySQLContainer, error) {
			return tcmysql.Run(ctx, img,
				tcmysql.WithUsername("root"),
				tcmysql.WithPassword(password),
				tcmysql.WithDatabase("idgen"),
				// The module waits for a line only MySQL prints; mysqlReady
				// matches MariaDB's too.
				testcontainers.WithWaitStrategyAndDeadline(serverReadyTimeout,
					wait.ForLog(mysqlReady).AsRegexp(),
					wait.ForListeningPort("3306/tcp"),
				),
			)
		},
		func(ctx context.Context, c *tcmysql.MySQLContainer, password string) (string, error) {
			endpoint, err := c.PortEndpoint(ctx, "3306/tcp", "")
			if err == nil && endpoint == "" {
				err = errors.New("no address")
			}
			if err != nil {
				return "", err
			}
			return (&url.URL{Scheme: "mysql", User: url.UserPassword("root", password), Host: endpoint, Path: "/idgen"}).String(), nil
		})
}
