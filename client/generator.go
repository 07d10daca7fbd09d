package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// MaxGeneratorHolderLen is the longest GeneratorOptions.Holder, in bytes:
// the server stores "<token name>/<holder>" in at most
// allocator.MaxHolderLen bytes.
const MaxGeneratorHolderLen = allocator.MaxHolderLen - 65

// WorkerRange is an inclusive range of worker IDs.
type WorkerRange = allocator.WorkerRange

// GeneratorOptions configure a Generator. The zero value, with a Token,
// leases a worker ID of datacenter 0 from every worker ID of the layout,
// with a 30 s ttl and a heartbeat every 10 s.
type GeneratorOptions struct {
	// Token is the bearer token, with the leases scope.
	Token string
	// Datacenter is the datacenter ID, within the cluster's layout.
	Datacenter int64
	// Workers is the pool of worker IDs to lease from; nil means every
	// worker ID of the layout.
	Workers *WorkerRange
	// TTL is the lease's time to live: whole milliseconds, within the
	// server's bounds (3 s to 5 min by default); zero means 30 s.
	TTL time.Duration
	// Heartbeat is the interval between heartbeats: at most TTL/2; zero
	// means TTL/3.
	Heartbeat time.Duration
	// Margin is taken off the local deadline (the monotonic time before an
	// acquire or heartbeat was sent, plus TTL): less than TTL/2; zero
	// means TTL/10.
	Margin time.Duration
	// Holder names this process in the lease table, unique per process:
	// printable ASCII without spaces, at most MaxGeneratorHolderLen bytes.
	// Empty means host/pid/random. The server stores it as
	// "<token name>/<holder>".
	Holder string
	// MaxClockOffset: beyond this offset of the clock from the database's
	// time the generator refuses to issue; zero means 5 s, the server's
	// default. The server bounds every ceiling by its own limit whatever
	// this one is.
	MaxClockOffset time.Duration
	// MaxBackwardWait is the largest backward step of the clock that is
	// waited out; zero means 10 ms.
	MaxBackwardWait time.Duration
	// Clock is the wall clock the IDs carry; nil means the system's.
	// Deadlines always run on the monotonic clock.
	Clock snowflake.Clock
	// Logger receives the lease's events (acquired, lost, heartbeat
	// failures, released); nil discards them.
	Logger *slog.Logger
	// HTTPClient sends the lease requests; nil means one of the
	// generator's own.
	HTTPClient *http.Client
	// UserAgent is sent with every request; empty means "idgen-go-client".
	UserAgent string
	// NoWait makes NewGenerator return once the lease keeper runs, before
	// it holds a lease: Next refuses with ErrNoLease until it does.
	NoWait bool
}

// Generator makes Snowflake IDs in the caller's process under a worker
// lease held through idgen's lease API: an allocator.Keeper, the one an
// idgen node runs, over a LeaseStore. It issues an ID only with a
// timestamp inside the lease's fence (above the previous holder's ceiling,
// at most the ceiling the database committed) and only before its local
// deadline (the monotonic time read before the last successful acquire or
// heartbeat was sent, plus the ttl, minus the margin). It heartbeats every
// Heartbeat; when the server answers that the lease is lost, it stops at
// once and acquires another; on Close it releases the lease with the
// timestamp of the last ID it issued, so that the next holder can start
// right after it.
//
// Next and NextN cost no request and no allocation: a Generator reaches
// the layout's cap (4,096,000 IDs per second with 12 sequence bits). It is
// safe for concurrent use.
type Generator struct {
	keeper *allocator.Keeper
	store  *LeaseStore
}

// NewGenerator returns a generator leasing from the idgen service at
// baseURL, such as "http://idgen:8080". It reads the cluster's layout,
// starts the lease keeper and, unless opts.NoWait, waits until the keeper
// holds its first lease.
//
// It returns an error wrapping ErrInvalidInput for bad options; the
// server's *Error when it refuses the layout request or the first acquire
// for good (a bad request, a token without the leases scope, the lease API
// off: errors.Is matches ErrInvalid, ErrUnauthorized, ErrForbidden or
// ErrNotFound); and, when ctx ends before a lease is held (the pool is
// full, or the service unreachable), ctx's error joined with the last
// failure. Other failures of the acquire are retried with backoff until
// then.
func NewGenerator(ctx context.Context, baseURL string, opts GeneratorOptions) (*Generator, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	store, err := NewLeaseStore(baseURL, LeaseStoreOptions{Token: opts.Token, HTTPClient: opts.HTTPClient, UserAgent: opts.UserAgent})
	if err != nil {
		return nil, err
	}
	layout, err := store.EnsureLayout(ctx, snowflake.Layout{})
	if err != nil {
		store.CloseIdleConnections()
		return nil, err
	}
	w := &watchedStore{LeaseStore: store, claims: make(chan claimOutcome, 1)}
	keeper, err := allocator.NewKeeper(w, allocator.KeeperSettings{
		Layout:          layout,
		DatacenterID:    opts.Datacenter,
		WorkerIDs:       opts.Workers,
		Holder:          opts.Holder,
		TTL:             opts.TTL,
		Heartbeat:       opts.Heartbeat,
		Margin:          opts.Margin,
		MaxClockOffset:  opts.MaxClockOffset,
		MaxBackwardWait: opts.MaxBackwardWait,
		Clock:           opts.Clock,
		Logger:          opts.Logger,
	})
	if err != nil {
		store.CloseIdleConnections()
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	g := &Generator{keeper: keeper, store: store}
	if err := keeper.Start(ctx); err != nil {
		_ = g.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("idgen generator: %w", err)
	}
	if opts.NoWait {
		return g, nil
	}
	if err := g.waitLease(ctx, w.claims); err != nil {
		_ = g.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return g, nil
}

// validate checks what the keeper's settings do not: the holder's
// characters and the ttl's unit.
func (o GeneratorOptions) validate() error {
	if o.TTL%time.Millisecond != 0 {
		return fmt.Errorf("%w: TTL %s is not a whole number of milliseconds", ErrInvalidInput, o.TTL)
	}
	if len(o.Holder) > MaxGeneratorHolderLen {
		return fmt.Errorf("%w: Holder of %d bytes, want at most %d", ErrInvalidInput, len(o.Holder), MaxGeneratorHolderLen)
	}
	for i := 0; i < len(o.Holder); i++ {
		if c := o.Holder[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("%w: Holder must be printable ASCII without spaces", ErrInvalidInput)
		}
	}
	return nil
}

// waitLease waits until the keeper holds a lease, a claim fails for good,
// or ctx ends.
func (g *Generator) waitLease(ctx context.Context, claims <-chan claimOutcome) error {
	var last error
	for {
		select {
		case c := <-claims:
			err := c.err
			switch {
			case err == nil:
				// The keeper publishes the lease right after the claim
				// returns.
				for !g.keeper.Status().Held {
					select {
					case <-ctx.Done():
						return fmt.Errorf("idgen generator: no lease yet: %w", ctx.Err())
					case <-time.After(time.Millisecond):
					}
				}
				return nil
			case permanent(err):
				return fmt.Errorf("idgen generator: acquire a lease: %w", err)
			}
			last = err
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("idgen generator: no lease yet: %w", errors.Join(ctx.Err(), last))
			}
			return fmt.Errorf("idgen generator: no lease yet: %w", ctx.Err())
		}
	}
}

// watchedStore is the generator's LeaseStore: it reports the outcome of
// each claim to NewGenerator, which waits for the first lease.
type watchedStore struct {
	*LeaseStore
	claims chan claimOutcome // the latest outcome; buffer of one
}

// claimOutcome is how a claim ended: nil for a lease.
type claimOutcome struct{ err error }

func (w *watchedStore) Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error) {
	res, err := w.LeaseStore.Claim(ctx, req)
	// Keep only the latest outcome: the keeper's loop is the one sender.
	select {
	case <-w.claims:
	default:
	}
	w.claims <- claimOutcome{err}
	return res, err
}

// Next returns a Snowflake ID. When the generator cannot prove its lease
// it issues nothing and returns an error that matches ErrUnavailable and
// says why: ErrNoLease (none held yet, lost, or the pool is full),
// ErrLeaseExpired (the local deadline passed without a heartbeat),
// ErrClockOffset, ErrClockBackward, a refusal of the fence
// (snowflake.ErrBelowFloor, snowflake.ErrAboveCeiling, in a
// *snowflake.RefusalError) or ErrGeneratorClosed.
func (g *Generator) Next() (int64, error) {
	id, err := g.keeper.Next()
	if err != nil {
		return 0, refused(err)
	}
	return int64(id), nil
}

// NextN appends n Snowflake IDs to dst and returns it. On an error (as
// Next's) the IDs appended so far are returned with it. It allocates
// nothing when dst has room for them.
func (g *Generator) NextN(dst []int64, n int) ([]int64, error) {
	if n < 0 {
		return dst, fmt.Errorf("%w: count %d", ErrInvalidInput, n)
	}
	dst, err := g.keeper.NextSnowflakes(dst, n)
	if err != nil {
		return dst, refused(err)
	}
	return dst, nil
}

// Ready returns nil when the generator can issue IDs now, and otherwise an
// error as Next's saying why not.
func (g *Generator) Ready() error {
	if err := g.keeper.Ready(); err != nil {
		return refused(err)
	}
	return nil
}

// Layout returns the cluster's Snowflake layout, which the IDs follow.
func (g *Generator) Layout() snowflake.Layout { return g.keeper.Layout() }

// Holder returns the holder name the generator sends; the server stores
// it as "<token name>/<holder>".
func (g *Generator) Holder() string { return g.keeper.Holder() }

// Status returns a snapshot of the lease: the worker ID and fencing
// version held, the fence, the time left until the local deadline, the
// clock offset and the lease's counters.
func (g *Generator) Status() allocator.KeeperStatus { return g.keeper.Status() }

// Close stops issuing and heartbeating, and releases the lease with the
// timestamp of the last ID issued, so that the next holder of the worker
// ID can start right after it; ctx bounds the release. A lease whose
// release fails expires after its ttl. Calling Close again returns nil.
func (g *Generator) Close(ctx context.Context) error {
	err := g.keeper.Close(ctx)
	g.store.CloseIdleConnections()
	return err
}

// refused wraps a refusal of the keeper so that it also matches
// ErrUnavailable.
func refused(err error) error { return &refusal{err: err} }

type refusal struct{ err error }

func (e *refusal) Error() string   { return "idgen generator: " + e.err.Error() }
func (e *refusal) Unwrap() []error { return []error{ErrUnavailable, e.err} }
