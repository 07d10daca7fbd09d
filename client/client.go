package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/backoff"
	"github.com/idgen-project/idgen/snowflake"
)

// Defaults used for zero fields of Options.
const (
	DefaultMaxAttempts      = 4
	DefaultBackoffBase      = 50 * time.Millisecond
	DefaultBackoffMax       = 2 * time.Second
	DefaultMaxRetryAfter    = 30 * time.Second
	DefaultAttemptTimeout   = 5 * time.Second
	DefaultMaxCount         = idgen.DefaultMaxCount // the server's default --max-count
	DefaultBreakerThreshold = 5
	DefaultBreakerCooldown  = 5 * time.Second
	DefaultCacheLowWater    = 0.25
)

// maxBody bounds a response read; the largest answer is about 5.8 MB.
const maxBody = 8 << 20

// Options configure a Client; the zero value is ready to use.
type Options struct {
	// Token is the bearer token (ids scope); empty for a node without tokens.
	Token string

	// HTTPClient sends the requests (nil: the package's own); leave its
	// Timeout zero, AttemptTimeout bounds each attempt.
	HTTPClient *http.Client

	// MaxAttempts counts attempts per call (0: DefaultMaxAttempts; 1: no retry).
	MaxAttempts int
	// BackoffBase and BackoffMax bound the backoff: retry n waits a random
	// half to all of min(BackoffMax, BackoffBase·2^(n-1)), at least 1ms.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxRetryAfter is the longest Retry-After waited for; a longer one
	// returns the server's error at once.
	MaxRetryAfter time.Duration
	// AttemptTimeout bounds one attempt, response body included.
	AttemptTimeout time.Duration

	// MaxCount is the most IDs per request (the server's --max-count);
	// larger counts are split.
	MaxCount int

	Breaker BreakerOptions
	Cache   CacheOptions // off by default

	// UserAgent is sent with every request; empty means "idgen-go-client".
	UserAgent string
}

// BreakerOptions configure the circuit breaker: after Threshold failed
// attempts in a row (network errors, 5xx and 429) it fails calls with
// ErrCircuitOpen for Cooldown, then lets one probe through.
type BreakerOptions struct {
	// Threshold: zero means DefaultBreakerThreshold; negative disables it.
	Threshold int
	// Cooldown: zero means DefaultBreakerCooldown.
	Cooldown time.Duration
}

// CacheOptions configure the local block cache, refilled in the background
// below LowWater of a block; a call for more than a block is not cached.
type CacheOptions struct {
	// Snowflake is the block size for Next and NextN; zero: uncached.
	Snowflake int
	// Namespaces maps namespaces to block sizes (at most Options.MaxCount).
	Namespaces map[string]int
	// LowWater is the refill fraction in (0, 1); 0 means DefaultCacheLowWater.
	LowWater float64
}

// Source says where the IDs of a draw come from.
type Source string

// Sources of IDs.
const (
	SourceSegment   Source = "segment"   // the namespace's counter
	SourceSnowflake Source = "snowflake" // Snowflake IDs: the namespace's fallback, or Next
	// SourceMixed marks a cached draw of both sources (see Range.Source).
	SourceMixed Source = "mixed"
)

// Range is a run of consecutive IDs First..Last, inclusive.
type Range struct {
	First  int64
	Last   int64
	Source Source
}

// Draw is the answer to DrawNamespace and DrawSnowflakes.
type Draw struct {
	Namespace string  // "" for DrawSnowflakes
	IDs       []int64 // in the order handed out
	Ranges    []Range // the contiguous runs the IDs form, in the same order; none for DrawSnowflakes
	// Source is SourceSegment, SourceSnowflake (fallback) or SourceMixed.
	Source Source
	// Leases are the fencing tokens, one per run of IDs from one lease.
	Leases []LeaseToken
	// Revision is a strict namespace's highest checked revision, else 0.
	Revision int64
}

// LeaseToken is the fencing token of Snowflake IDs; for one datacenter and
// worker, a greater FencingVersion is a later holder.
type LeaseToken struct {
	Datacenter     int64
	Worker         int64
	FencingVersion int64
}

// Parts is the decomposition of a Snowflake ID by the server's layout.
type Parts struct {
	ID          int64
	Time        time.Time // when the ID was made, UTC, millisecond precision
	TimestampMS int64     // the same instant in Unix milliseconds
	Datacenter  int64
	Worker      int64
	Sequence    int64
}

// Client talks to one idgen service (a node or a load balancer). It is safe
// for concurrent use; Close stops background cache refills.
type Client struct {
	nodes     *nodes // scheme://host[/prefix], no trailing slash: one, or several (NewFailover)
	hc        *http.Client
	ownHC     bool
	clock     clock
	breaker   *breaker
	userAgent string
	auth      string // the Authorization header; "" for none

	maxAttempts    int
	backoffBase    time.Duration
	backoffMax     time.Duration
	maxRetryAfter  time.Duration
	attemptTimeout time.Duration
	maxCount       int

	snowCache *cache            // nil when uncached
	nsCaches  map[string]*cache // read-only after New

	revMu     sync.Mutex
	revisions map[string]int64 // the highest revision seen per strict namespace

	life     context.Context // cancelled by Close; bounds cache refills
	cancel   context.CancelFunc
	wg       sync.WaitGroup // cache refills in flight
	mu       sync.Mutex     // guards isClosed and wg.Add
	isClosed bool
	closing  atomic.Bool // set by Close; read by every cached draw
}

// New returns a client for baseURL, such as "http://idgen:8080" (a path
// prefix is kept); bad URLs or options wrap ErrInvalidInput.
func New(baseURL string, opts Options) (*Client, error) {
	return newClient(baseURL, opts, systemClock{})
}

func newClient(baseURL string, opts Options, clk clock) (*Client, error) {
	nodes, err := newNodes([]string{baseURL})
	if err != nil {
		return nil, err
	}
	if opts.MaxAttempts < 0 || opts.BackoffBase < 0 || opts.BackoffMax < 0 || opts.MaxRetryAfter < 0 ||
		opts.AttemptTimeout < 0 || opts.MaxCount < 0 || opts.Breaker.Cooldown < 0 ||
		opts.Cache.Snowflake < 0 || opts.Cache.LowWater < 0 || opts.Cache.LowWater >= 1 {
		return nil, fmt.Errorf("%w: negative option, or Cache.LowWater outside [0, 1)", ErrInvalidInput)
	}
	auth, err := bearer(opts.Token)
	if err != nil {
		return nil, err
	}
	c := &Client{
		nodes:          nodes,
		hc:             opts.HTTPClient,
		clock:          clk,
		userAgent:      orDefault(opts.UserAgent, "idgen-go-client"),
		auth:           auth,
		maxAttempts:    orDefault(opts.MaxAttempts, DefaultMaxAttempts),
		backoffBase:    orDefault(opts.BackoffBase, DefaultBackoffBase),
		backoffMax:     orDefault(opts.BackoffMax, DefaultBackoffMax),
		maxRetryAfter:  orDefault(opts.MaxRetryAfter, DefaultMaxRetryAfter),
		attemptTimeout: orDefault(opts.AttemptTimeout, DefaultAttemptTimeout),
		maxCount:       orDefault(opts.MaxCount, DefaultMaxCount),
	}
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		c.hc = &http.Client{Transport: tr}
		c.ownHC = true
	}
	c.breaker = newBreaker(orDefault(opts.Breaker.Threshold, DefaultBreakerThreshold),
		orDefault(opts.Breaker.Cooldown, DefaultBreakerCooldown), clk.Now)

	low := orDefault(opts.Cache.LowWater, DefaultCacheLowWater)
	if opts.Cache.Snowflake > c.maxCount {
		return nil, fmt.Errorf("%w: Cache.Snowflake %d is above MaxCount %d", ErrInvalidInput, opts.Cache.Snowflake, c.maxCount)
	}
	if opts.Cache.Snowflake > 0 {
		c.snowCache = newCache(c, "", opts.Cache.Snowflake, low)
	}
	for ns, size := range opts.Cache.Namespaces {
		if err := validNamespace(ns); err != nil {
			return nil, err
		}
		if size < 0 || size > c.maxCount {
			return nil, fmt.Errorf("%w: cache block %d for namespace %q: want 0..MaxCount (%d)", ErrInvalidInput, size, ns, c.maxCount)
		}
		if size == 0 {
			continue
		}
		if c.nsCaches == nil {
			c.nsCaches = map[string]*cache{}
		}
		c.nsCaches[ns] = newCache(c, ns, size, low)
	}
	c.life, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// parseBaseURL checks http(s)://host[:port][/prefix], trimming a slash.
func parseBaseURL(baseURL string) (string, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%w: base URL must be http(s)://host[:port][/prefix], got %q", ErrInvalidInput, redactURL(baseURL))
	}
	if u.User != nil {
		return "", fmt.Errorf("%w: base URL must not carry credentials", ErrInvalidInput)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// bearer returns token's Authorization header; its error omits the token.
func bearer(token string) (string, error) {
	if token == "" {
		return "", nil
	}
	if strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "", fmt.Errorf("%w: the token must not hold spaces or control characters", ErrInvalidInput)
	}
	return "Bearer " + token, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Close stops background refills and waits for them, dropping cached IDs;
// cached calls then fail with ErrClosed. It returns nil.
func (c *Client) Close() error {
	c.mu.Lock()
	already := c.isClosed
	c.isClosed = true
	c.closing.Store(true)
	c.mu.Unlock()
	if already {
		return nil
	}
	c.cancel()
	c.wg.Wait()
	if c.ownHC {
		c.hc.CloseIdleConnections()
	}
	return nil
}

// goBackground registers a refill Close waits for; false after Close.
func (c *Client) goBackground() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isClosed {
		return false
	}
	c.wg.Add(1)
	return true
}

// BreakerState returns the state of the circuit breaker.
func (c *Client) BreakerState() BreakerState { return c.breaker.State() }

// Next returns one Snowflake ID. Errors: *Error (matching the sentinels),
// ErrCircuitOpen, network errors, ctx's, ErrClosed when cached after Close.
func (c *Client) Next(ctx context.Context) (int64, error) {
	ids, err := c.NextN(ctx, 1)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// NextN returns n Snowflake IDs, ascending unless a cache refill intervenes;
// counts above MaxCount are split. n < 1 wraps ErrInvalidInput.
func (c *Client) NextN(ctx context.Context, n int) ([]int64, error) {
	d, err := c.DrawSnowflakes(ctx, n)
	return d.IDs, err
}

// DrawSnowflakes is NextN with the leases' fencing tokens (Draw.Leases).
func (c *Client) DrawSnowflakes(ctx context.Context, n int) (Draw, error) {
	if n < 1 {
		return Draw{}, fmt.Errorf("%w: count %d, want at least 1", ErrInvalidInput, n)
	}
	if c.snowCache != nil && n <= c.snowCache.size {
		return c.snowCache.take(ctx, n)
	}
	return c.drawDirect(ctx, "", n)
}

// NextInNamespace returns one ID of namespace ns. Errors as DrawNamespace.
func (c *Client) NextInNamespace(ctx context.Context, ns string) (int64, error) {
	d, err := c.DrawNamespace(ctx, ns, 1)
	if err != nil {
		return 0, err
	}
	return d.IDs[0], nil
}

// DrawNamespace returns n IDs of namespace ns with their ranges and source.
// Errors: ErrInvalidInput for a bad name or n < 1; ErrNotFound; a
// *StaleRevisionError for a strict namespace's stale answer; else as Next.
func (c *Client) DrawNamespace(ctx context.Context, ns string, n int) (Draw, error) {
	if err := validNamespace(ns); err != nil {
		return Draw{}, err
	}
	if n < 1 {
		return Draw{}, fmt.Errorf("%w: count %d, want at least 1", ErrInvalidInput, n)
	}
	if ch := c.nsCaches[ns]; ch != nil && n <= ch.size {
		return ch.take(ctx, n)
	}
	return c.drawDirect(ctx, ns, n)
}

// Parse decomposes the Snowflake ID id; a refused ID matches ErrInvalid.
func (c *Client) Parse(ctx context.Context, id int64) (Parts, error) {
	if id < 0 {
		return Parts{}, fmt.Errorf("%w: negative ID %d", ErrInvalidInput, id)
	}
	return c.parse(ctx, strconv.FormatInt(id, 10))
}

// parse is GET /ids/{text}, text escaped for a path.
func (c *Client) parse(ctx context.Context, text string) (Parts, error) {
	var r struct {
		ID          snowflake.ID `json:"id"`
		Time        time.Time    `json:"time"`
		TimestampMS int64        `json:"timestamp_ms"`
		Datacenter  int64        `json:"datacenter"`
		Worker      int64        `json:"worker"`
		Sequence    int64        `json:"sequence"`
	}
	if err := c.get(ctx, "/ids/"+text, &r); err != nil {
		return Parts{}, err
	}
	return Parts{
		ID: int64(r.ID), Time: r.Time.UTC(), TimestampMS: r.TimestampMS,
		Datacenter: r.Datacenter, Worker: r.Worker, Sequence: r.Sequence,
	}, nil
}

// idsResponse is a GET /ids answer, its IDs in its format.
type idsResponse struct {
	IDs       []string `json:"ids"`
	Namespace string   `json:"namespace"`
	Source    Source   `json:"source"`
	Format    string   `json:"format"`
	Ranges    []struct {
		First string `json:"first"`
		Last  string `json:"last"`
	} `json:"ranges"`
	Lease *struct {
		Datacenter     int64 `json:"datacenter"`
		Worker         int64 `json:"worker"`
		FencingVersion int64 `json:"fencing_version"`
	} `json:"lease"`
	Revision int64 `json:"revision"`
}

// drawDirect asks the server for n IDs, in requests of at most maxCount.
func (c *Client) drawDirect(ctx context.Context, ns string, n int) (Draw, error) {
	d := Draw{Namespace: ns, IDs: make([]int64, 0, n)}
	for len(d.IDs) < n {
		k := min(n-len(d.IDs), c.maxCount)
		part, err := c.fetch(ctx, ns, k)
		if err != nil {
			return Draw{}, err
		}
		d.IDs = append(d.IDs, part.IDs...)
		for _, r := range part.Ranges {
			d.Ranges = appendRange(d.Ranges, r)
		}
		d.Source = mergeSource(d.Source, part.Source)
		d.Leases = appendLeases(d.Leases, part.Leases...)
		d.Revision = max(d.Revision, part.Revision)
	}
	return d, nil
}

// fetch makes one GET /ids request (with retries) for exactly n IDs.
func (c *Client) fetch(ctx context.Context, ns string, n int) (Draw, error) {
	q := url.Values{}
	q.Set("count", strconv.Itoa(n))
	if ns != "" {
		q.Set("namespace", ns)
	}
	// The fetch serving this request comes later: its revision must be higher.
	seen := c.revisionSeen(ns)
	var r idsResponse
	if err := c.get(ctx, "/ids?"+q.Encode(), &r); err != nil {
		return Draw{}, err
	}
	if len(r.IDs) != n {
		return Draw{}, fmt.Errorf("%w: asked for %d IDs, got %d", ErrBadResponse, n, len(r.IDs))
	}
	if r.Revision < 0 {
		return Draw{}, fmt.Errorf("%w: negative revision %d", ErrBadResponse, r.Revision)
	}
	if ns != "" && r.Revision > 0 {
		if err := c.observeRevision(ns, seen, r.Revision); err != nil {
			return Draw{}, err
		}
	}
	src := r.Source
	if src == "" {
		src = SourceSnowflake
		if ns != "" {
			src = SourceSegment
		}
	}
	d := Draw{Namespace: ns, IDs: make([]int64, n), Source: src, Revision: r.Revision}
	for i, text := range r.IDs {
		id, err := decodeAnswered(text, r.Format)
		if err != nil {
			return Draw{}, err
		}
		d.IDs[i] = id
	}
	if l := r.Lease; l != nil && src == SourceSnowflake {
		d.Leases = []LeaseToken{{Datacenter: l.Datacenter, Worker: l.Worker, FencingVersion: l.FencingVersion}}
	}
	switch {
	case ns == "": // Snowflake IDs: ranges would say nothing useful
	case len(r.Ranges) > 0:
		d.Ranges = make([]Range, len(r.Ranges))
		for i, rg := range r.Ranges {
			first, err := decodeAnswered(rg.First, r.Format)
			if err != nil {
				return Draw{}, err
			}
			last, err := decodeAnswered(rg.Last, r.Format)
			if err != nil {
				return Draw{}, err
			}
			d.Ranges[i] = Range{First: first, Last: last, Source: src}
		}
	default:
		for _, id := range d.IDs {
			d.Ranges = appendRange(d.Ranges, Range{First: id, Last: id, Source: src})
		}
	}
	return d, nil
}

// get sends GET path with retries and decodes a 200 answer into out.
func (c *Client) get(ctx context.Context, path string, out any) error {
	fail := func(attempts int, err error) error {
		if attempts > 1 {
			return fmt.Errorf("idgen client: GET %s: after %d attempts: %w", path, attempts, err)
		}
		return fmt.Errorf("idgen client: GET %s: %w", path, err)
	}
	var (
		last  error
		bo    *backoff.Backoff // the waits between this call's attempts, made at the first retry
		moves int              // the times this call moved on to another node (NewFailover)
	)
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fail(attempt-1, joinLast(err, last))
		}
		if !c.breaker.allow() {
			return fail(attempt-1, joinLast(ErrCircuitOpen, last))
		}
		err := c.attempt(ctx, path, out)
		// Move to an untried node; the breaker counts only all-node failures.
		moveOn := err != nil && moves < len(c.nodes.urls)-1 && failsOver(err)
		switch {
		case err == nil:
			c.breaker.done(outcomeSuccess)
			return nil
		case ctx.Err() != nil:
			c.breaker.done(outcomeNeutral)
			return fail(attempt, joinLast(ctx.Err(), last))
		case moveOn:
			c.breaker.done(outcomeNeutral)
		case failure(err):
			c.breaker.done(outcomeFailure)
		default:
			c.breaker.done(outcomeSuccess)
		}
		if !retryable(err) || attempt >= c.maxAttempts {
			return fail(attempt, err)
		}
		if moveOn {
			// At once, whatever this node's Retry-After.
			moves++
			last = err
			continue
		}
		if bo == nil {
			bo = backoff.New(min(c.backoffBase, c.backoffMax), c.backoffMax)
		}
		wait := bo.Next()
		var e *Error
		if errors.As(err, &e) && e.RetryAfter > 0 {
			if e.RetryAfter > c.maxRetryAfter {
				return fail(attempt, err) // asked to wait longer than we are willing to
			}
			wait = max(wait, e.RetryAfter)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return fail(attempt, err) // the retry could not happen before the deadline
		}
		if serr := c.clock.Sleep(ctx, wait); serr != nil {
			return fail(attempt, joinLast(serr, err))
		}
		last = err
	}
}

func joinLast(err, last error) error {
	if last == nil {
		return err
	}
	return fmt.Errorf("%w (last attempt: %w)", err, last)
}

// attempt sends one request, decoding a 200 into out. Errors: *netError,
// *Error, or ErrBadResponse for a bad 200.
func (c *Client) attempt(ctx context.Context, path string, out any) error {
	actx, cancel := context.WithTimeout(ctx, c.attemptTimeout)
	defer cancel()
	node, base := c.nodes.current()
	err := c.send(actx, base+path, out)
	if err != nil && ctx.Err() == nil && failsOver(err) {
		c.nodes.failed(node)
	}
	return err
}

// send is one GET of target, decoded into out; errors as attempt.
func (c *Client) send(actx context.Context, target string, out any) error {
	req, err := http.NewRequestWithContext(actx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", c.userAgent)
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return &netError{err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	switch {
	case err != nil:
		return &netError{fmt.Errorf("reading the response: %w", err)}
	case resp.StatusCode != http.StatusOK:
		return newError(resp.StatusCode, resp.Header, body, c.clock.Now())
	case len(body) > maxBody:
		return fmt.Errorf("%w: body larger than %d bytes", ErrBadResponse, maxBody)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%w: %w", ErrBadResponse, err)
	}
	return nil
}

// validNamespace checks a name by the server's rule, without a request.
func validNamespace(ns string) error {
	if err := allocator.ValidNamespace(ns); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	return nil
}

// redactURL drops anything that could be a credential from a URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// appendRange appends r to rs, merging it into a last run it continues.
func appendRange(rs []Range, r Range) []Range {
	if n := len(rs); n > 0 && rs[n-1].Source == r.Source && rs[n-1].Last+1 == r.First {
		rs[n-1].Last = r.Last
		return rs
	}
	return append(rs, r)
}

// revisionSeen returns the highest revision seen for ns, 0 for none.
func (c *Client) revisionSeen(ns string) int64 {
	if ns == "" {
		return 0
	}
	c.revMu.Lock()
	defer c.revMu.Unlock()
	return c.revisions[ns]
}

// observeRevision checks got against seen, the highest known when the
// request was sent (answers may arrive out of order), and remembers it.
func (c *Client) observeRevision(ns string, seen, got int64) error {
	if got <= seen {
		return &StaleRevisionError{Namespace: ns, Got: got, Previous: seen}
	}
	c.revMu.Lock()
	defer c.revMu.Unlock()
	if got > c.revisions[ns] {
		if c.revisions == nil {
			c.revisions = map[string]int64{}
		}
		c.revisions[ns] = got
	}
	return nil
}

// appendLeases appends more to ls, skipping one equal to the last.
func appendLeases(ls []LeaseToken, more ...LeaseToken) []LeaseToken {
	for _, l := range more {
		if n := len(ls); n > 0 && ls[n-1] == l {
			continue
		}
		ls = append(ls, l)
	}
	return ls
}

func mergeSource(a, b Source) Source {
	switch {
	case a == "":
		return b
	case a == b:
		return a
	}
	return SourceMixed
}
