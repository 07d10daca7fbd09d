// Package testdb gives integration tests a database of their own.
//
// Postgres, MySQL and SQLite each return the DSN of a fresh, empty schema
// (PostgreSQL), database (MySQL/MariaDB) or file (SQLite) with a random name,
// dropped when the test ends, so tests never see each other's rows. The DSNs
// are in idgen's URL forms and can be given to the stores' Open functions:
//
//	postgres://user:pass@host:5432/db?sslmode=disable&search_path=<schema>
//	mysql://user:pass@host:3306/<database>
//	sqlite:<path in the test's temporary directory>
//
// The servers come from the environment: IDGEN_TEST_POSTGRES_DSN and
// IDGEN_TEST_MYSQL_DSN, in the URL forms above, name a server on which the
// user may create and drop schemas or databases. When one is not set and a
// Docker engine answers, the package starts a postgres:15 or mysql:8
// container with testcontainers-go, once per test process and only when a test
// first asks for it; testcontainers' reaper removes it when the process ends.
// Otherwise the test is skipped with a message saying how to run it, or fails
// when IDGEN_TEST_REQUIRE_DB=1 (as in CI), so that a missing database can never
// pass for a green run.
package testdb

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
)

// The environment variables testdb reads.
const (
	// EnvPostgres names a PostgreSQL server: postgres://user:pass@host:port/db?sslmode=disable.
	EnvPostgres = "IDGEN_TEST_POSTGRES_DSN"
	// EnvMySQL names a MySQL or MariaDB server: mysql://user:pass@host:port/db.
	EnvMySQL = "IDGEN_TEST_MYSQL_DSN"
	// EnvRequire, set to 1, makes a missing database fail the test instead of
	// skipping it.
	EnvRequire = "IDGEN_TEST_REQUIRE_DB"
)

// Container images started when no DSN is set and Docker answers.
const (
	postgresImage = "postgres:15"
	mysqlImage    = "mysql:8"
)

// Time limits: starting a container may pull its image; creating or dropping
// a schema is quick.
const (
	containerStartTimeout = 5 * time.Minute
	setupTimeout          = 30 * time.Second
)

// The containers are the one piece of process-wide state in testdb: each is
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
	server := os.Getenv(EnvPostgres)
	if server == "" {
		var err error
		if server, err = postgresContainer(); err != nil {
			unavailable(tb, "PostgreSQL", EnvPostgres,
				"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", err)
		}
	}
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		tb.Fatalf("testdb: %s is not a postgres:// URL", EnvPostgres)
	}
	schema := newName(tb)
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
	server := os.Getenv(EnvMySQL)
	if server == "" {
		var err error
		if server, err = mysqlContainer(); err != nil {
			unavailable(tb, "MySQL", EnvMySQL, "mysql://root@127.0.0.1:3306/test", err)
		}
	}
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "mysql" || u.Host == "" {
		tb.Fatalf("testdb: %s is not a mysql:// URL", EnvMySQL)
	}
	db, err := openMySQL(u)
	if err != nil {
		tb.Fatalf("testdb: %s: %v", u.Redacted(), err)
	}
	defer db.Close()
	name := newName(tb)
	ident := "`" + name + "`" // newName returns [a-z0-9_] only
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
	return "sqlite:" + filepath.Join(tb.TempDir(), newName(tb)+".db")
}

// unavailable skips tb, or fails it when EnvRequire is 1, saying how to
// give the tests a database.
func unavailable(tb testing.TB, what, env, example string, cause error) {
	tb.Helper()
	msg := fmt.Sprintf("testdb: no %s server for this test: set %s (e.g. %s) or run a Docker engine "+
		"so that testcontainers-go can start one (%v)", what, env, example, cause)
	if os.Getenv(EnvRequire) == "1" {
		tb.Fatalf("%s; %s=1 forbids skipping", msg, EnvRequire)
		return
	}
	tb.Skip(msg)
}

// newName returns a fresh random name for a schema or database, starting with
// a short form of the test's name so that leftovers can be traced to a test:
// idgen_<test>_<16 hex digits>, at most 48 characters of [a-z0-9_].
func newName(tb testing.TB) string {
	tb.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("testdb: random name: %v", err)
	}
	var short strings.Builder
	for _, r := range strings.ToLower(tb.Name()) {
		if short.Len() == 24 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			short.WriteRune(r)
		default:
			if s := short.String(); s != "" && !strings.HasSuffix(s, "_") {
				short.WriteByte('_')
			}
		}
	}
	return "idgen_" + strings.TrimSuffix(short.String(), "_") + "_" + hex.EncodeToString(b[:])
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
			err = fmt.Errorf("no Docker engine: %v", r)
		}
	}()
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return fmt.Errorf("no Docker engine: %w", err)
	}
	defer provider.Close()
	if err := provider.Health(ctx); err != nil {
		return fmt.Errorf("no Docker engine: %w", err)
	}
	return nil
}

// startPostgres starts the process's PostgreSQL container and returns its DSN.
func startPostgres() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), containerStartTimeout)
	defer cancel()
	if err := dockerAvailable(ctx); err != nil {
		return "", err
	}
	c, err := tcpostgres.Run(ctx, postgresImage,
		tcpostgres.WithDatabase("idgen"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("idgen"),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		return "", fmt.Errorf("start %s container: %w", postgresImage, err)
	}
	dsn, err := c.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		return "", fmt.Errorf("%s container address: %w", postgresImage, err)
	}
	return dsn, nil
}

// startMySQL starts the process's MySQL container and returns its DSN.
func startMySQL() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), containerStartTimeout)
	defer cancel()
	if err := dockerAvailable(ctx); err != nil {
		return "", err
	}
	c, err := tcmysql.Run(ctx, mysqlImage,
		tcmysql.WithUsername("root"),
		tcmysql.WithPassword("idgen"),
		tcmysql.WithDatabase("idgen"),
	)
	if err != nil {
		return "", fmt.Errorf("start %s container: %w", mysqlImage, err)
	}
	endpoint, err := c.PortEndpoint(ctx, "3306/tcp", "")
	if err != nil {
		return "", fmt.Errorf("%s container address: %w", mysqlImage, err)
	}
	if endpoint == "" {
		return "", errors.New(mysqlImage + " container has no address")
	}
	return (&url.URL{Scheme: "mysql", User: url.UserPassword("root", "idgen"), Host: endpoint, Path: "/idgen"}).String(), nil
}
