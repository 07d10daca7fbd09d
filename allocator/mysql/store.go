// Package mysql is idgen's Store on MySQL 8 and MariaDB 10.5+, through
// database/sql and go-sql-driver/mysql.
//
// Open connects with a mysql:// URL; the schema is created by the goose
// migrations returned by Store.Migrations. Leases are claimed, extended and
// released in SERIALIZABLE transactions that are retried, whole, on deadlocks,
// lock wait timeouts and (MariaDB with innodb_snapshot_isolation=ON) rows
// changed since the transaction's snapshot; every timestamp is the
// database's, in UTC (UTC_TIMESTAMP(6)), never the node's clock.
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

// Connection defaults, used unless the DSN sets them. A short lock wait
// timeout turns a transaction stuck behind another into a quick retry.
const (
	defaultPort         = "3306"
	defaultDialTimeout  = 5 * time.Second
	defaultIOTimeout    = 30 * time.Second
	defaultLockWait     = "5" // innodb_lock_wait_timeout, in seconds
	defaultConnLifetime = 30 * time.Minute
	defaultMaxIdleConns = 8
)

// idleTxTimeoutParam is MariaDB's session setting that ends a session left
// idle inside a transaction. MySQL has none.
const idleTxTimeoutParam = "idle_transaction_timeout"

// errUnknownVariable is the server's error 1193, ER_UNKNOWN_SYSTEM_VARIABLE.
const errUnknownVariable = 1193

// DefaultIdleTransactionTimeout is the idle_transaction_timeout (seconds) of
// idgen's sessions on MariaDB unless the DSN sets one, as on PostgreSQL
// (postgres.DefaultIdleInTransactionTimeout). idgen sends a transaction's
// statements back to back, so a session idle inside one has lost its
// client: a node paused (SIGSTOP, a frozen VM) or cut off by a silent
// network in the middle of a heartbeat. Without it the server keeps that
// transaction, and the lease row's lock, until the client comes back or TCP
// keepalive notices (hours by default): no other node can claim the worker
// ID after the lease expires. The server now ends such a session after this
// long and releases its locks. A DSN parameter idle_transaction_timeout=0
// turns it off.
const DefaultIdleTransactionTimeout = "5"

// Store is idgen's Store on MySQL or MariaDB. It is safe for concurrent use.
type Store struct {
	db        *sql.DB
	connector driver.Connector       // for the migrations' own pool
	dsn       string                 // redacted, for error messages
	tx        *sqltx.Runner[*sql.Tx] // SERIALIZABLE transactions, retried on conflicts
	// pruneBatch is how many events one statement of PruneLeaseEvents
	// deletes.
	pruneBatch int
	seq        *seqsql.Store // Sequences
}

// Open connects to the MySQL or MariaDB database named by dsn, a URL such as
// mysql://user:pass@host:3306/idgen?tls=true. Query parameters are
// go-sql-driver/mysql's (timeout, readTimeout, tls, …; others become session
// variables). Whatever the DSN says, times are read and written in UTC, and
// UPDATE reports the rows it matched; on MariaDB, sessions left idle in a
// transaction end after DefaultIdleTransactionTimeout unless the DSN says
// otherwise. Open checks that the server answers. Errors name the DSN
// without its password.
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
		// Setting a variable the server does not have fails the
		// connection: ask first (MySQL answers 1193), then connect again
		// with it.
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

// connect opens a pool on the database named by dsn, lets setup size it,
// and checks that the server answers. It returns the pool, its connector
// and the DSN without its password.
func connect(ctx context.Context, dsn string, setup func(*sql.DB)) (*sql.DB, driver.Connector, string, error) {
	cfg, safe, err := parseDSN(dsn)
	if err != nil {
		return nil, nil, "", err
	}
	db, connector, err := connectConfig(ctx, cfg, safe, setup)
	return db, connector, safe, err
}

// connectConfig is connect with the DSN parsed: cfg, and safe, the DSN
// without its password.
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

// parseDSN turns idgen's mysql:// URL into a driver configuration, and
// returns the URL without its password for messages.
func parseDSN(dsn string) (*gomysql.Config, string, error) {
	if err := dburl.Check(dsn); err != nil {
		return nil, "", fmt.Errorf("mysql: invalid DSN (not shown): %w", err)
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != "mysql" || u.Opaque != "" {
		// The DSN cannot be shown: the password may be anywhere in it.
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
	// The driver parses its own parameters; user and password are set
	// afterwards so that they never pass through its parser or its errors.
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
	// DATETIME columns hold UTC; the session zone matters only to
	// functions like NOW(), which idgen does not use, and to people.
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

// Migrations returns a goose provider for idgen's MySQL schema. It has a
// connection pool of its own, which closing the provider closes; the store
// stays open.
func (s *Store) Migrations() (*goose.Provider, error) {
	return sqlstore.Migrations(migrations.DialectMySQL, sql.OpenDB(s.connector))
}

// SerializationRetries returns how many transactions the store has run again
// after a deadlock, a lock wait timeout or a row changed since the
// transaction's snapshot, since it was opened.
func (s *Store) SerializationRetries() int64 { return s.tx.Retries() }

// errRetry, returned by fn, asks inTx for another try: a compare-and-set
// found the row changed, which SERIALIZABLE should have prevented.
var errRetry = sqltx.ErrRetry

// inTx runs fn in a SERIALIZABLE transaction and commits it, running it
// again, whole, on a conflict (retryable) or errRetry; see sqltx.Runner.Run.
// Under SERIALIZABLE, InnoDB turns plain reads into shared locks, so two
// claimers that read the same rows and then update one deadlock, and InnoDB
// rolls one back: that is the conflict the retry resolves. Transactions
// that return a value run through sqltx.Get(ctx, s.tx, …), the same runner.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.tx.Run(ctx, fn)
}

// retryable reports whether err is one of these MySQL errors, after which
// another try may succeed:
//   - 1213 ER_LOCK_DEADLOCK: InnoDB rolled the transaction back;
//   - 1205 ER_LOCK_WAIT_TIMEOUT: innodb_lock_wait_timeout passed;
//   - 1020 ER_CHECKREAD: a row read changed since the transaction's snapshot,
//     which MariaDB reports with innodb_snapshot_isolation=ON (the default
//     from 11.6.2) where the others would deadlock.
func retryable(err error) bool {
	return sqltx.HasCode(err, func(e *gomysql.MySQLError) uint16 { return e.Number }, 1213, 1205, 1020)
}
