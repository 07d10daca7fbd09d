// Package mysql is idgen's Store on MySQL 8 and MariaDB 10.5+, through
// database/sql and go-sql-driver/mysql.
//
// Leases use SERIALIZABLE transactions retried whole on deadlocks, lock
// wait timeouts and MariaDB's snapshot conflicts; every timestamp is the
// database's UTC, never the node's clock.
package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/pressly/goose/v3"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/dburl"
	"github.com/idgen-project/idgen/internal/seqsql"
	"github.com/idgen-project/idgen/internal/sqlstore"
	"github.com/idgen-project/idgen/internal/sqltx"
	"github.com/idgen-project/idgen/migrations"
)

var (
	_ allocator.Store        = (*Store)(nil)
	_ allocator.RetryCounter = (*Store)(nil)
)

// Connection defaults unless the DSN sets them; a short lock wait turns a
// stuck transaction into a quick retry.
const (
	defaultPort         = "3306"
	defaultDialTimeout  = 5 * time.Second
	defaultIOTimeout    = 30 * time.Second
	defaultLockWait     = "5" // innodb_lock_wait_timeout, in seconds
	defaultConnLifetime = 30 * time.Minute
	defaultMaxIdleConns = 8
)

// idleTxTimeoutParam is MariaDB's idle-in-transaction timeout (not MySQL's).
const idleTxTimeoutParam = "idle_transaction_timeout"

// errUnknownVariable is the server's error 1193, ER_UNKNOWN_SYSTEM_VARIABLE.
const errUnknownVariable = 1193

// DefaultIdleTransactionTimeout is idgen's MariaDB idle_transaction_timeout
// (seconds) unless the DSN sets one (0: off): a session idle in a
// transaction lost its client and would hold the lease row's lock for hours.
const DefaultIdleTransactionTimeout = "5"

// Store is idgen's Store on MySQL or MariaDB. It is safe for concurrent use.
type Store struct {
	db        *sql.DB
	connector driver.Connector       // for the migrations' own pool
	dsn       string                 // redacted, for error messages
	tx        *sqltx.Runner[*sql.Tx] // SERIALIZABLE transactions, retried on conflicts
	// pruneBatch is how many events one prune statement deletes.
	pruneBatch int
	seq        *seqsql.Store // Sequences
}

// Open connects to dsn, such as mysql://user:pass@host:3306/idgen?tls=true
// (go-sql-driver/mysql parameters; others become session variables). Times
// are always UTC and UPDATE reports matched rows; MariaDB sessions get
// DefaultIdleTransactionTimeout. Errors omit the password.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, safe, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	setup := func(db *sql.DB) {
		db.SetConnMaxLifetime(defaultConnLifetime)
		db.SetMaxIdleConns(defaultMaxIdleConns)
	}
	db, connector, err := connectConfig(ctx, cfg, safe, setup)
	if err != nil {
		return nil, err
	}
	if _, set := cfg.Params[idleTxTimeoutParam]; !set {
		// Setting an unknown variable fails the connection: ask first
		// (MySQL answers 1193), then reconnect with it.
		var v sql.NullInt64
		err := db.QueryRowContext(ctx, "SELECT @@SESSION."+idleTxTimeoutParam).Scan(&v)
		if err == nil {
			_ = db.Close()
			cfg.Params[idleTxTimeoutParam] = DefaultIdleTransactionTimeout
			if db, connector, err = connectConfig(ctx, cfg, safe, setup); err != nil {
				return nil, err
			}
		} else if !sqltx.HasCode(err, func(e *gomysql.MySQLError) uint16 { return e.Number }, errUnknownVariable) {
			_ = db.Close()
			return nil, fmt.Errorf("mysql: connect to %s: read %s: %w", safe, idleTxTimeoutParam, err)
		}
	}
	tx := sqltx.New(sqltx.DB(db, &sql.TxOptions{Isolation: sql.LevelSerializable}),
		sqltx.Settings{Name: "mysql", Retryable: retryable})
	st := &Store{db: db, connector: connector, dsn: safe, tx: tx, pruneBatch: defaultPruneBatch}
	st.seq = st.newSequences()
	return st, nil
}

// connect opens and checks a pool on dsn, sized by setup, returning it,
// its connector and the redacted DSN.
func connect(ctx context.Context, dsn string, setup func(*sql.DB)) (*sql.DB, driver.Connector, string, error) {
	cfg, safe, err := parseDSN(dsn)
	if err != nil {
		return nil, nil, "", err
	}
	db, connector, err := connectConfig(ctx, cfg, safe, setup)
	return db, connector, safe, err
}

// connectConfig is connect with the DSN parsed; safe is it redacted.
func connectConfig(ctx context.Context, cfg *gomysql.Config, safe string, setup func(*sql.DB)) (*sql.DB, driver.Connector, error) {
	connector, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("mysql: invalid DSN %s: %w", safe, err)
	}
	db := sql.OpenDB(connector)
	setup(db)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("mysql: connect to %s: %w", safe, err)
	}
	return db, connector, nil
}

// parseDSN returns the driver configuration and the redacted URL.
func parseDSN(dsn string) (*gomysql.Config, string, error) {
	if err := dburl.Check(dsn); err != nil {
		return nil, "", fmt.Errorf("mysql: invalid DSN (not shown): %w", err)
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != "mysql" || u.Opaque != "" {
		// Not shown: the password may be anywhere in it.
		return nil, "", fmt.Errorf("mysql: invalid DSN: not a mysql://user:pass@host:port/database URL")
	}
	safe := dburl.Redact(dsn)
	if u.Host == "" {
		return nil, "", fmt.Errorf("mysql: invalid DSN %s: no host", safe)
	}
	dbName := strings.TrimPrefix(u.Path, "/")
	if dbName == "" || strings.Contains(dbName, "/") {
		return nil, "", fmt.Errorf("mysql: invalid DSN %s: want one database name as the path", safe)
	}
	addr := u.Host
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(strings.Trim(addr, "[]"), defaultPort)
	}
	// User and password are set afterwards, out of the driver's parser.
	driverDSN := "tcp(" + addr + ")/"
	if q := u.Query(); len(q) > 0 {
		driverDSN += "?" + q.Encode()
	}
	cfg, err := gomysql.ParseDSN(driverDSN)
	if err != nil {
		return nil, "", fmt.Errorf("mysql: invalid DSN %s: %w", safe, err)
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.DBName = dbName
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.ClientFoundRows = true
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultDialTimeout
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = defaultIOTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = defaultIOTimeout
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["innodb_lock_wait_timeout"]; !ok {
		cfg.Params["innodb_lock_wait_timeout"] = defaultLockWait
	}
	// DATETIME columns hold UTC; the zone matters only to NOW() and people.
	cfg.Params["time_zone"] = "'+00:00'"
	return cfg, safe, nil
}

// Close closes every connection of the store.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("mysql: close: %w", err)
	}
	return nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return dialect.Ping(ctx, s.dsn, s.db.PingContext)
}

// Migrations returns a goose provider for the MySQL schema on its own pool;
// closing it leaves the store open.
func (s *Store) Migrations() (*goose.Provider, error) {
	return sqlstore.Migrations(migrations.DialectMySQL, sql.OpenDB(s.connector))
}

// SerializationRetries returns how many transactions were rerun.
func (s *Store) SerializationRetries() int64 { return s.tx.Retries() }

// errRetry asks inTx for another try: a compare-and-set lost.
var errRetry = sqltx.ErrRetry

// inTx runs fn in a SERIALIZABLE transaction, rerun whole on a conflict or
// errRetry (sqltx.Runner.Run). InnoDB's SERIALIZABLE reads take shared
// locks, so racing claimers deadlock and one is rolled back and retried.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.tx.Run(ctx, fn)
}

// retryable reports whether another try may succeed after err: 1213
// deadlock, 1205 lock wait timeout, or 1020 ER_CHECKREAD (MariaDB's
// snapshot isolation).
func retryable(err error) bool {
	return sqltx.HasCode(err, func(e *gomysql.MySQLError) uint16 { return e.Number }, 1213, 1205, 1020)
}
