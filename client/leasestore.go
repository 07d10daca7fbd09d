package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
	"github.com/idgen-project/idgen/snowflake"
)

// DefaultLeaseRequestTimeout bounds one LeaseStore request.
const DefaultLeaseRequestTimeout = 10 * time.Second

const maxLeaseBody = 64 << 10

// LeaseStoreOptions configure a LeaseStore.
type LeaseStoreOptions struct {
	Token      string       // the bearer token, with the leases scope
	HTTPClient *http.Client // nil means one of the store's own
	// RequestTimeout bounds each request; zero means DefaultLeaseRequestTimeout.
	RequestTimeout time.Duration
	UserAgent      string // empty means "idgen-go-client"
}

// LeaseStore is an allocator.LeaseStore over idgen's lease API, for a
// Generator's keeper; one attempt per call. Refusals are *Error values that
// also match allocator's sentinels. The server sets owner and ceilings.
// Safe for concurrent use.
type LeaseStore struct {
	rpc       idgenv1connect.LeaseServiceClient
	hc        *http.Client
	ownHC     bool
	auth      string // the Authorization header; "" for none
	timeout   time.Duration
	userAgent string

	serverPool bool // claims name no pool: the server picks from its own

	mu      sync.Mutex // guards secrets
	secrets map[heldLease]string
}

type heldLease struct {
	key     allocator.LeaseKey
	version int64
}

// maxSecrets bounds the secrets kept; a keeper holds one lease at a time.
const maxSecrets = 64

// NewLeaseStore returns a LeaseStore for baseURL, or an error wrapping
// ErrInvalidInput for a bad URL, token or timeout.
func NewLeaseStore(baseURL string, opts LeaseStoreOptions) (*LeaseStore, error) {
	base, err := parseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	auth, err := bearer(opts.Token)
	if err != nil {
		return nil, err
	}
	if opts.RequestTimeout < 0 {
		return nil, fmt.Errorf("%w: negative RequestTimeout", ErrInvalidInput)
	}
	s := &LeaseStore{
		hc:        opts.HTTPClient,
		auth:      auth,
		timeout:   orDefault(opts.RequestTimeout, DefaultLeaseRequestTimeout),
		userAgent: orDefault(opts.UserAgent, "idgen-go-client"),
		secrets:   map[heldLease]string{},
	}
	if s.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 4
		s.hc = &http.Client{Transport: tr}
		s.ownHC = true
	}
	s.rpc = idgenv1connect.NewLeaseServiceClient(s.hc, base, connect.WithReadMaxBytes(maxLeaseBody))
	return s, nil
}

// CloseIdleConnections closes the store's idle HTTP connections.
func (s *LeaseStore) CloseIdleConnections() {
	if s.ownHC {
		s.hc.CloseIdleConnections()
	}
}

// EnsureLayout returns the cluster's layout (GetLayout) for the caller to
// compare; a remote holder cannot record one.
func (s *LeaseStore) EnsureLayout(ctx context.Context, _ snowflake.Layout) (snowflake.Layout, error) {
	res, err := call(ctx, s, "GetLayout", "", s.rpc.GetLayout, &idgenv1.GetLayoutRequest{})
	if err != nil {
		return snowflake.Layout{}, err
	}
	j := res.GetLayout()
	l := snowflake.Layout{TimeBits: int(j.GetTimeBits()), DatacenterBits: int(j.GetDatacenterBits()), WorkerBits: int(j.GetWorkerBits()),
		SequenceBits: int(j.GetSequenceBits()), Epoch: time.UnixMilli(j.GetEpochMs()).UTC()}
	if err := l.Validate(); err != nil {
		return snowflake.Layout{}, fmt.Errorf("%w: GetLayout: %w", ErrBadResponse, err)
	}
	return l, nil
}

// Claim acquires a lease (AcquireLease). A grant of another ttl or outside
// the pool is refused with ErrBadResponse.
func (s *LeaseStore) Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error) {
	if req.TTL%time.Millisecond != 0 {
		return allocator.ClaimResult{}, fmt.Errorf("%w: ttl %s is not a whole number of milliseconds", ErrInvalidInput, req.TTL)
	}
	in := &idgenv1.AcquireLeaseRequest{
		Holder: req.Holder, Datacenter: int32(req.DatacenterID),
		TtlMs: req.TTL.Milliseconds(), CeilingMs: req.CeilingMS, MaxPrevCeilingMs: req.MaxPrevCeilingMS,
	}
	if !s.serverPool {
		in.Workers = &idgenv1.WorkerPool{Min: int32(req.MinWorkerID), Max: int32(req.MaxWorkerID)}
	}
	g, err := call(ctx, s, "AcquireLease", req.RequestID, s.rpc.AcquireLease, in)
	if err != nil {
		return allocator.ClaimResult{}, err
	}
	key := allocator.LeaseKey{DatacenterID: int64(g.GetDatacenter()), WorkerID: int64(g.GetWorker())}
	switch {
	case g.GetTtlMs() != in.TtlMs:
		return allocator.ClaimResult{}, fmt.Errorf("%w: AcquireLease: asked for a ttl of %d ms, granted %d", ErrBadResponse, in.TtlMs, g.GetTtlMs())
	case key.DatacenterID != req.DatacenterID || key.WorkerID < req.MinWorkerID || key.WorkerID > req.MaxWorkerID:
		return allocator.ClaimResult{}, fmt.Errorf("%w: AcquireLease: asked for a worker ID of %d/%d-%d, granted %d/%d",
			ErrBadResponse, req.DatacenterID, req.MinWorkerID, req.MaxWorkerID, key.DatacenterID, key.WorkerID)
	case g.GetFencingVersion() < 1 || g.GetFloorMs() < 1 || g.GetCeilingMs() < g.GetFloorMs()-1 || g.GetDbTimeMs() <= 0 || g.GetExpiresAtMs() <= 0:
		return allocator.ClaimResult{}, fmt.Errorf("%w: AcquireLease: version %d, floor %d, ceiling %d, db time %d, expiry %d",
			ErrBadResponse, g.GetFencingVersion(), g.GetFloorMs(), g.GetCeilingMs(), g.GetDbTimeMs(), g.GetExpiresAtMs())
	case g.GetLeaseSecret() == "":
		return allocator.ClaimResult{}, fmt.Errorf("%w: AcquireLease: no lease_secret", ErrBadResponse)
	}
	s.keepSecret(heldLease{key, g.GetFencingVersion()}, g.GetLeaseSecret())
	dbNow := time.UnixMilli(g.GetDbTimeMs()).UTC()
	res := allocator.ClaimResult{
		Lease: allocator.Lease{
			LeaseKey:       key,
			Holder:         g.GetHolder(),
			FencingVersion: g.GetFencingVersion(),
			AcquiredAt:     dbNow,
			HeartbeatAt:    dbNow,
			ExpiresAt:      time.UnixMilli(g.GetExpiresAtMs()).UTC(),
			CeilingMS:      g.GetCeilingMs(),
			FloorMS:        g.GetFloorMs(),
		},
		PrevCeilingMS: g.GetFloorMs() - 1,
		DBNow:         dbNow,
		PrevHolder:    g.GetPreviousHolder(),
	}
	if res.PrevHolder != "" && res.PrevHolder == g.GetHolder() {
		res.PrevHolder = req.Holder // a claim of one's own again
	}
	return res, nil
}

// Heartbeat extends a lease (HeartbeatLease).
func (s *LeaseStore) Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error) {
	if req.TTL%time.Millisecond != 0 {
		return allocator.Lease{}, time.Time{}, fmt.Errorf("%w: ttl %s is not a whole number of milliseconds", ErrInvalidInput, req.TTL)
	}
	held := heldLease{req.Key, req.FencingVersion}
	secret, err := s.secretOf(held, "HeartbeatLease")
	if err != nil {
		return allocator.Lease{}, time.Time{}, err
	}
	in := &idgenv1.HeartbeatLeaseRequest{
		Datacenter: int32(req.Key.DatacenterID), Worker: int32(req.Key.WorkerID), Holder: req.Holder,
		FencingVersion: req.FencingVersion, LeaseSecret: secret, TtlMs: req.TTL.Milliseconds(), CeilingMs: req.CeilingMS,
		Issued: issuedBlock(req.Block),
	}
	b, err := call(ctx, s, "HeartbeatLease", req.RequestID, s.rpc.HeartbeatLease, in)
	if err != nil {
		if errors.Is(err, allocator.ErrLeaseLost) {
			s.forget(held)
		}
		return allocator.Lease{}, time.Time{}, err
	}
	if b.GetFencingVersion() != req.FencingVersion || b.GetDbTimeMs() <= 0 || b.GetTtlMs() != in.TtlMs {
		return allocator.Lease{}, time.Time{}, fmt.Errorf("%w: HeartbeatLease: version %d (sent %d), ttl %d ms (sent %d), db time %d",
			ErrBadResponse, b.GetFencingVersion(), req.FencingVersion, b.GetTtlMs(), in.TtlMs, b.GetDbTimeMs())
	}
	dbNow := time.UnixMilli(b.GetDbTimeMs()).UTC()
	return allocator.Lease{
		LeaseKey:       req.Key,
		Holder:         req.Holder,
		FencingVersion: b.GetFencingVersion(),
		HeartbeatAt:    dbNow,
		ExpiresAt:      time.UnixMilli(b.GetExpiresAtMs()).UTC(),
		CeilingMS:      b.GetCeilingMs(),
	}, dbNow, nil
}

// Release gives a lease back (ReleaseLease) and returns the ceiling left.
func (s *LeaseStore) Release(ctx context.Context, req allocator.ReleaseRequest) (int64, error) {
	held := heldLease{req.Key, req.FencingVersion}
	secret, err := s.secretOf(held, "ReleaseLease")
	if err != nil {
		return 0, err
	}
	in := &idgenv1.ReleaseLeaseRequest{
		Datacenter: int32(req.Key.DatacenterID), Worker: int32(req.Key.WorkerID), Holder: req.Holder,
		FencingVersion: req.FencingVersion, LeaseSecret: secret,
		LastTimestampMs: req.LastTimestampMS, NoneIssued: req.LastTimestampMS == 0,
		Issued: issuedBlock(req.Block),
	}
	b, err := call(ctx, s, "ReleaseLease", req.RequestID, s.rpc.ReleaseLease, in)
	if err == nil || errors.Is(err, allocator.ErrLeaseLost) {
		s.forget(held)
	}
	if err != nil {
		return 0, err
	}
	return b.GetCeilingMs(), nil
}

// keepSecret remembers a lease's secret, forgetting the oldest first.
func (s *LeaseStore) keepSecret(l heldLease, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.secrets) >= maxSecrets {
		var oldest heldLease
		first := true
		for k := range s.secrets {
			if first || k.version < oldest.version {
				oldest, first = k, false
			}
		}
		delete(s.secrets, oldest)
	}
	s.secrets[l] = secret
}

// secretOf returns a lease's secret, or wraps allocator.ErrLeaseLost.
func (s *LeaseStore) secretOf(l heldLease, method string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	secret, ok := s.secrets[l]
	if !ok {
		return "", fmt.Errorf("idgen client: LeaseService.%s: %w: worker %d/%d at version %d was not acquired through this LeaseStore (%w)",
			method, ErrLeaseLost, l.key.DatacenterID, l.key.WorkerID, l.version, allocator.ErrLeaseLost)
	}
	return secret, nil
}

func (s *LeaseStore) forget(l heldLease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.secrets, l)
}

// RecordLeaseEvent only checks ev: the server records lease API events.
func (s *LeaseStore) RecordLeaseEvent(_ context.Context, ev allocator.LeaseEvent) error {
	return ev.Validate()
}

// call makes one call of the lease API, bounded by the store's timeout.
func call[Req, Res any](ctx context.Context, s *LeaseStore, method, requestID string,
	fn func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), msg *Req,
) (*Res, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req := connect.NewRequest(msg)
	h := req.Header()
	h.Set("User-Agent", s.userAgent)
	if s.auth != "" {
		h.Set("Authorization", s.auth)
	}
	if requestID != "" {
		h.Set("X-Request-ID", requestID)
	}
	res, err := fn(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("idgen client: LeaseService.%s: %w", method, errorOfCall(err))
	}
	return res.Msg, nil
}

// errorOfCall maps a failed call: idgen's error becomes an *Error (matching
// the keeper's sentinel for a lease code), no answer a *netError, any
// other answer stays the connect error.
func errorOfCall(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) || !connect.IsWireError(ce) {
		return &netError{err}
	}
	e := &Error{Detail: ce.Message()}
	for _, d := range ce.Details() {
		switch v, _ := d.Value(); v := v.(type) {
		case *errdetails.ErrorInfo:
			if v.GetDomain() == idgen.ErrorDomain {
				e.Code = strings.ToLower(v.GetReason())
			}
		case *errdetails.RetryInfo:
			e.RetryAfter = v.GetRetryDelay().AsDuration()
		}
	}
	row, ok := codeInfo(e.Code)
	if !ok {
		return err
	}
	e.Status, e.Title = row.HTTPStatus, row.Title
	var sentinel error
	switch row.Code {
	case idgen.LeaseLost:
		sentinel = allocator.ErrLeaseLost
	case idgen.NoWorkerAvailable:
		sentinel = allocator.ErrNoWorkerAvailable
	case idgen.InvalidRelease:
		sentinel = allocator.ErrInvalidRelease
	default:
		return e
	}
	return &domainError{sentinel: sentinel, err: e}
}

// domainError is an *Error that also matches an allocator sentinel.
type domainError struct {
	sentinel error
	err      *Error
}

func (e *domainError) Error() string   { return e.err.Error() }
func (e *domainError) Unwrap() []error { return []error{e.sentinel, e.err} }

// permanent reports whether a failed claim will never succeed: 400, 401,
// 403, 404 or an unusable answer.
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

// issuedBlock is the block reported for the audit trail; nil when none.
func issuedBlock(b allocator.Block) *idgenv1.IssuedBlock {
	if b.Count == 0 {
		return nil
	}
	return &idgenv1.IssuedBlock{Count: b.Count, FromMs: b.FromMS, ToMs: b.ToMS}
}
