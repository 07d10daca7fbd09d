package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/leaseapi/leasejson"
	"github.com/idgen-project/idgen/snowflake"
)

// DefaultLeaseRequestTimeout bounds one request of a LeaseStore whose
// context has no earlier deadline.
const DefaultLeaseRequestTimeout = 10 * time.Second

// maxLeaseBody bounds what a LeaseStore reads of one response.
const maxLeaseBody = 64 << 10

// LeaseStoreOptions configure a LeaseStore. The zero value is usable
// against a server that needs no token (none does once the lease API is
// on: give Token).
type LeaseStoreOptions struct {
	// Token is the bearer token, with the leases scope.
	Token string
	// HTTPClient sends the requests; nil means one of the store's own.
	HTTPClient *http.Client
	// RequestTimeout bounds each request, unless the context's deadline is
	// earlier; zero means DefaultLeaseRequestTimeout.
	RequestTimeout time.Duration
	// UserAgent is sent with every request; empty means "idgen-go-client".
	UserAgent string
}

// LeaseStore is an allocator.LeaseStore over idgen's lease API
// (/v1/leases, docs/leases.md): what a Generator runs its allocator.Keeper
// on, so that a process holds a worker lease of a remote idgen cluster
// with the keeper's own rules.
//
// It makes one attempt per call and never retries: the keeper retries
// claims and heartbeats on its own schedule, and decides what a failure
// means for the lease. Answers map to the keeper's errors: lease_lost
// wraps allocator.ErrLeaseLost, no_worker_available
// allocator.ErrNoWorkerAvailable and invalid_release
// allocator.ErrInvalidRelease (each also matches ErrLeaseLost,
// ErrNoWorkerAvailable or ErrInvalidRelease of this package); any other
// answer is an *Error, and no answer at all a network error.
//
// The server, not the caller, decides some fields of the requests: it
// qualifies the holder with the token's name ("<token name>/<holder>"),
// records the token's name as the owner, and bounds ceilings by its own
// allowed clock offset, so that ClaimRequest.Owner and MaxClockOffset and
// HeartbeatRequest.Owner and MaxClockOffset are not sent. A RequestID is
// sent as the X-Request-ID header.
//
// A LeaseStore is safe for concurrent use.
type LeaseStore struct {
	base      string
	auth      string // the Authorization header; "" for none
	hc        *http.Client
	ownHC     bool
	timeout   time.Duration
	userAgent string
}

// NewLeaseStore returns a LeaseStore for the idgen service at baseURL. It
// returns an error wrapping ErrInvalidInput for a URL that is not http(s),
// a token that cannot be sent in a header, or a negative timeout.
func NewLeaseStore(baseURL string, opts LeaseStoreOptions) (*LeaseStore, error) {
	base, err := parseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	if strings.ContainsFunc(opts.Token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, fmt.Errorf("%w: the token must not hold spaces or control characters", ErrInvalidInput)
	}
	if opts.RequestTimeout < 0 {
		return nil, fmt.Errorf("%w: negative RequestTimeout", ErrInvalidInput)
	}
	s := &LeaseStore{
		base:      base,
		hc:        opts.HTTPClient,
		timeout:   orDefault(opts.RequestTimeout, DefaultLeaseRequestTimeout),
		userAgent: orDefault(opts.UserAgent, "idgen-go-client"),
	}
	if opts.Token != "" {
		s.auth = "Bearer " + opts.Token
	}
	if s.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 4
		s.hc = &http.Client{Transport: tr}
		s.ownHC = true
	}
	return s, nil
}

// CloseIdleConnections closes the idle connections of the store's own
// HTTP client.
func (s *LeaseStore) CloseIdleConnections() {
	if s.ownHC {
		s.hc.CloseIdleConnections()
	}
}

// The lease API's requests, as docs/leases.md and docs/openapi.yaml
// describe them; its answers are those of internal/leaseapi/leasejson,
// which the server encodes.
type (
	poolBody struct {
		Min int64 `json:"min"`
		Max int64 `json:"max"`
	}
	acquireBody struct {
		Holder           string   `json:"holder"`
		Datacenter       int64    `json:"datacenter"`
		Workers          poolBody `json:"workers"`
		TTLMS            int64    `json:"ttl_ms"`
		CeilingMS        int64    `json:"ceiling_ms,omitempty"`
		MaxPrevCeilingMS int64    `json:"max_prev_ceiling_ms,omitempty"`
	}
	heartbeatBody struct {
		Holder         string `json:"holder"`
		FencingVersion int64  `json:"fencing_version"`
		TTLMS          int64  `json:"ttl_ms"`
		CeilingMS      int64  `json:"ceiling_ms,omitempty"`
	}
	releaseBody struct {
		Holder          string `json:"holder"`
		FencingVersion  int64  `json:"fencing_version"`
		LastTimestampMS int64  `json:"last_timestamp_ms"`
	}
)

// EnsureLayout returns the layout the cluster records (GET
// /v1/leases/layout). A remote holder cannot record a layout: layout is
// not sent, and the caller compares what comes back with what it wants,
// as allocator.Keeper.Start does.
func (s *LeaseStore) EnsureLayout(ctx context.Context, _ snowflake.Layout) (snowflake.Layout, error) {
	var b leasejson.Layout
	if err := s.call(ctx, http.MethodGet, "/v1/leases/layout", "", nil, http.StatusOK, &b); err != nil {
		return snowflake.Layout{}, err
	}
	l := b.Snowflake()
	if err := l.Validate(); err != nil {
		return snowflake.Layout{}, fmt.Errorf("%w: GET /v1/leases/layout: %w", ErrBadResponse, err)
	}
	return l, nil
}

// Claim acquires a lease (POST /v1/leases). The result's Lease.Holder is
// the holder as the server stored it, qualified with the token's name.
// The server must grant exactly req.TTL: a grant of another ttl, or of a
// worker ID outside the pool asked for, is refused with ErrBadResponse
// (the lease it granted expires unused).
func (s *LeaseStore) Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error) {
	if req.TTL%time.Millisecond != 0 {
		return allocator.ClaimResult{}, fmt.Errorf("%w: ttl %s is not a whole number of milliseconds", ErrInvalidInput, req.TTL)
	}
	in := acquireBody{
		Holder: req.Holder, Datacenter: req.DatacenterID, Workers: poolBody{req.MinWorkerID, req.MaxWorkerID},
		TTLMS: req.TTL.Milliseconds(), CeilingMS: req.CeilingMS, MaxPrevCeilingMS: req.MaxPrevCeilingMS,
	}
	var g leasejson.Grant
	if err := s.call(ctx, http.MethodPost, "/v1/leases", req.RequestID, in, http.StatusCreated, &g); err != nil {
		return allocator.ClaimResult{}, err
	}
	switch {
	case g.TTLMS != in.TTLMS:
		return allocator.ClaimResult{}, fmt.Errorf("%w: POST /v1/leases: asked for a ttl of %d ms, granted %d", ErrBadResponse, in.TTLMS, g.TTLMS)
	case g.Datacenter != req.DatacenterID || g.Worker < req.MinWorkerID || g.Worker > req.MaxWorkerID:
		return allocator.ClaimResult{}, fmt.Errorf("%w: POST /v1/leases: asked for a worker ID of %d/%d-%d, granted %d/%d",
			ErrBadResponse, req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, g.Datacenter, g.Worker)
	case g.FencingVersion < 1 || g.FloorMS < 1 || g.CeilingMS < g.FloorMS-1 || g.DBTimeMS <= 0 || g.ExpiresAtMS <= 0:
		return allocator.ClaimResult{}, fmt.Errorf("%w: POST /v1/leases: version %d, floor %d, ceiling %d, db time %d, expiry %d",
			ErrBadResponse, g.FencingVersion, g.FloorMS, g.CeilingMS, g.DBTimeMS, g.ExpiresAtMS)
	}
	dbNow := time.UnixMilli(g.DBTimeMS).UTC()
	res := allocator.ClaimResult{
		Lease: allocator.Lease{
			LeaseKey:       allocator.LeaseKey{DatacenterID: g.Datacenter, WorkerID: g.Worker},
			Holder:         g.Holder,
			FencingVersion: g.FencingVersion,
			AcquiredAt:     dbNow,
			HeartbeatAt:    dbNow,
			ExpiresAt:      time.UnixMilli(g.ExpiresAtMS).UTC(),
			CeilingMS:      g.CeilingMS,
			FloorMS:        g.FloorMS,
		},
		PrevCeilingMS: g.FloorMS - 1,
		DBNow:         dbNow,
	}
	if p := g.PreviousHolder; p != nil {
		res.PrevHolder = *p
		if *p == g.Holder {
			res.PrevHolder = req.Holder // a claim of one's own again
		}
	}
	return res, nil
}

// Heartbeat extends a lease (POST /v1/leases/{dc}/{worker}/heartbeat).
// The returned Lease carries the key, the holder as req names it, the
// fencing version, the new ceiling and expiry, and the heartbeat time.
func (s *LeaseStore) Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error) {
	if req.TTL%time.Millisecond != 0 {
		return allocator.Lease{}, time.Time{}, fmt.Errorf("%w: ttl %s is not a whole number of milliseconds", ErrInvalidInput, req.TTL)
	}
	in := heartbeatBody{Holder: req.Holder, FencingVersion: req.FencingVersion, TTLMS: req.TTL.Milliseconds(), CeilingMS: req.CeilingMS}
	var b leasejson.Extension
	path := fmt.Sprintf("/v1/leases/%d/%d/heartbeat", req.Key.DatacenterID, req.Key.WorkerID)
	if err := s.call(ctx, http.MethodPost, path, req.RequestID, in, http.StatusOK, &b); err != nil {
		return allocator.Lease{}, time.Time{}, err
	}
	if b.FencingVersion != req.FencingVersion || b.DBTimeMS <= 0 {
		return allocator.Lease{}, time.Time{}, fmt.Errorf("%w: POST %s: version %d (sent %d), db time %d",
			ErrBadResponse, path, b.FencingVersion, req.FencingVersion, b.DBTimeMS)
	}
	dbNow := time.UnixMilli(b.DBTimeMS).UTC()
	return allocator.Lease{
		LeaseKey:       req.Key,
		Holder:         req.Holder,
		FencingVersion: b.FencingVersion,
		HeartbeatAt:    dbNow,
		ExpiresAt:      time.UnixMilli(b.ExpiresAtMS).UTC(),
		CeilingMS:      b.CeilingMS,
	}, dbNow, nil
}

// Release gives a lease back (POST /v1/leases/{dc}/{worker}/release) and
// returns the ceiling it left behind.
func (s *LeaseStore) Release(ctx context.Context, req allocator.ReleaseRequest) (int64, error) {
	in := releaseBody{Holder: req.Holder, FencingVersion: req.FencingVersion, LastTimestampMS: req.LastTimestampMS}
	var b leasejson.Released
	path := fmt.Sprintf("/v1/leases/%d/%d/release", req.Key.DatacenterID, req.Key.WorkerID)
	if err := s.call(ctx, http.MethodPost, path, req.RequestID, in, http.StatusOK, &b); err != nil {
		return 0, err
	}
	return b.CeilingMS, nil
}

// RecordLeaseEvent checks ev and records nothing: the lease API has no
// route to record events, because the broker records them itself, with the
// token's name and the request ID. It records the acquire or takeover, and
// the release, in the same transaction as the claim or release, and the
// lost event when it answers a heartbeat with lease_lost, which is when the
// keeper calls RecordLeaseEvent.
func (s *LeaseStore) RecordLeaseEvent(_ context.Context, ev allocator.LeaseEvent) error {
	return ev.Validate()
}

// call sends one request with a JSON body (when in is not nil) and
// decodes an answer of status want into out. Errors name the request.
func (s *LeaseStore) call(ctx context.Context, method, path, requestID string, in any, want int, out any) error {
	err := s.attempt(ctx, method, path, requestID, in, want, out)
	if err != nil {
		return fmt.Errorf("idgen client: %s %s: %w", method, path, err)
	}
	return nil
}

func (s *LeaseStore) attempt(ctx context.Context, method, path, requestID string, in any, want int, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidInput, err)
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, body)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	h := req.Header
	h.Set("Accept", "application/json, application/problem+json")
	h.Set("User-Agent", s.userAgent)
	if in != nil {
		h.Set("Content-Type", "application/json")
	}
	if s.auth != "" {
		h.Set("Authorization", s.auth)
	}
	if requestID != "" {
		h.Set("X-Request-ID", requestID)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return &netError{err}
	}
	err = decodeAnswer(resp, want, maxLeaseBody, time.Now, out)
	if e := (*Error)(nil); errors.As(err, &e) {
		return leaseError(e)
	}
	return err
}

// leaseError adds the keeper's sentinel to an answer of the lease API
// that has one.
func leaseError(e *Error) error {
	var sentinel error
	switch e.Code {
	case "lease_lost":
		sentinel = allocator.ErrLeaseLost
	case "no_worker_available":
		sentinel = allocator.ErrNoWorkerAvailable
	case "invalid_release":
		sentinel = allocator.ErrInvalidRelease
	default:
		return e
	}
	return &domainError{sentinel: sentinel, err: e}
}

// domainError is an answer of the server that also matches an allocator
// sentinel.
type domainError struct {
	sentinel error
	err      *Error
}

func (e *domainError) Error() string   { return e.err.Error() }
func (e *domainError) Unwrap() []error { return []error{e.sentinel, e.err} }

// permanent reports whether a failed claim will fail again however often
// it is retried: a refusal of the request itself (400), of the token
// (401, 403), the lease API off (404), or an answer the client cannot use.
func permanent(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		switch e.Status {
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
			return true
		}
	}
	return errors.Is(err, ErrBadResponse) || errors.Is(err, ErrInvalidInput)
}
