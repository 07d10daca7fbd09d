package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
)

// DefaultTable is the audit table unless the DSN names one (?table=).
const DefaultTable = "idgen_audit"

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// DDL returns the statement creating the audit table database.table, for
// ClickHouse 18.16 and later (no DateTime64, no LowCardinality).
// ReplacingMergeTree on event_id drops a batch sent twice at merge; read
// with FINAL for an exact count before then.
func DDL(database, table string) string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s (
    event_id String,
    event_ms Int64,
    event_time DateTime MATERIALIZED toDateTime(intDiv(event_ms, 1000)),
    kind String,
    node String,
    holder String,
    owner String,
    request_id String,
    datacenter_id Int64,
    worker_id Int64,
    fencing_version Int64,
    floor_ms Int64,
    ceiling_ms Int64,
    db_time_ms Int64,
    namespace String,
    first_id Int64,
    last_id Int64,
    count Int64,
    from_ms Int64,
    to_ms Int64,
    detail String
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(event_time)
ORDER BY event_id`, database, table)
}

// ClickHouse is the sink inserting batches as JSONEachRow over ClickHouse's
// HTTP interface, with no client library.
type ClickHouse struct {
	endpoint string // scheme://host:port/, without user information
	user     string
	password string
	database string
	table    string
	name     string // the redacted DSN
	client   *http.Client
	ensured  atomic.Bool // the table exists (EnsureTable succeeded)
}

// NewClickHouse returns the sink of dsn,
// clickhouse://user:password@host:port/database?table=name (clickhouses://
// for HTTPS); client nil is http.DefaultClient. Errors hide the password.
func NewClickHouse(dsn string, client *http.Client) (*ClickHouse, error) {
	name := RedactSink(dsn)
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w %s: unparsable", ErrInvalidSink, name)
	}
	scheme, port := "http", "8123"
	if u.Scheme == "clickhouses" {
		scheme, port = "https", "8443"
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("%w %s: no host", ErrInvalidSink, name)
	}
	if u.Port() != "" {
		port = u.Port()
	}
	c := &ClickHouse{database: "default", table: DefaultTable, name: name, client: client}
	if c.client == nil {
		c.client = http.DefaultClient
	}
	host := u.Hostname()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	c.endpoint = scheme + "://" + host + ":" + port + "/"
	if u.User != nil {
		c.user = u.User.Username()
		c.password, _ = u.User.Password()
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		c.database = db
	}
	q := u.Query()
	if t := q.Get("table"); t != "" {
		c.table = t
	}
	for k := range q {
		if k != "table" {
			return nil, fmt.Errorf("%w %s: unknown parameter %q (want table)", ErrInvalidSink, name, k)
		}
	}
	if !identifier.MatchString(c.database) || !identifier.MatchString(c.table) {
		return nil, fmt.Errorf("%w %s: database and table must match %s", ErrInvalidSink, name, identifier)
	}
	return c, nil
}

// String implements Sink.String: the DSN, its password masked.
func (c *ClickHouse) String() string { return c.name }

// Table returns database.table.
func (c *ClickHouse) Table() string { return c.database + "." + c.table }

// Close implements Sink.Close.
func (c *ClickHouse) Close() error { return nil }

// EnsureTable creates the database and audit table unless they exist.
func (c *ClickHouse) EnsureTable(ctx context.Context) error {
	if _, err := c.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+c.database, nil); err != nil {
		return err
	}
	if _, err := c.Exec(ctx, DDL(c.database, c.table), nil); err != nil {
		return err
	}
	c.ensured.Store(true)
	return nil
}

// Write implements Sink.Write: one INSERT … FORMAT JSONEachRow, creating
// the table first if no Write has yet.
func (c *ClickHouse) Write(ctx context.Context, events []Event) error {
	if !c.ensured.Load() {
		if err := c.EnsureTable(ctx); err != nil {
			return err
		}
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	for i := range events {
		if err := enc.Encode(&events[i]); err != nil {
			return fmt.Errorf("audit: encode event: %w", err)
		}
	}
	_, err := c.Exec(ctx, "INSERT INTO "+c.Table()+" FORMAT JSONEachRow", &body)
	return err
}

// maxAnswer bounds what Exec reads of an answer.
const maxAnswer = 64 << 20

// Exec sends query (with body as data if set) and returns the answer; a
// non-200 status is an error quoting ClickHouse's message.
func (c *ClickHouse) Exec(ctx context.Context, query string, body io.Reader) ([]byte, error) {
	target := c.endpoint + "?query=" + url.QueryEscape(query)
	method := http.MethodPost
	if body == nil {
		body = strings.NewReader("")
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, fmt.Errorf("audit clickhouse %s: %w", c.name, err)
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		// The URL has no user info: the password is in a header only.
		return nil, fmt.Errorf("audit clickhouse %s: %w", c.name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("audit clickhouse %s: read answer: %w", c.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(data))
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		if c.password != "" {
			msg = strings.ReplaceAll(msg, c.password, "xxxxx")
		}
		return nil, fmt.Errorf("audit clickhouse %s: HTTP %d: %s", c.name, resp.StatusCode, msg)
	}
	return data, nil
}

// Query runs a SELECT (without FORMAT) and decodes its JSONEachRow rows
// into T. 64-bit integers may come quoted: use ",string" or json.Number.
func Query[T any](ctx context.Context, c *ClickHouse, query string) ([]T, error) {
	data, err := c.Exec(ctx, query+" FORMAT JSONEachRow", nil)
	if err != nil {
		return nil, err
	}
	var out []T
	dec := json.NewDecoder(bytes.NewReader(data))
	for dec.More() {
		var row T
		if err := dec.Decode(&row); err != nil {
			return nil, fmt.Errorf("audit clickhouse %s: decode row: %w", c.name, err)
		}
		out = append(out, row)
	}
	return out, nil
}
