package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// MaxGeneratorHolderLen is the longest GeneratorOptions.Holder in bytes.
const MaxGeneratorHolderLen = idgen.MaxHolderLen

// WorkerRange is an inclusive range of worker IDs.
type WorkerRange = allocator.WorkerRange

// GeneratorOptions configure a Generator; zero fields take the keeper's
// defaults (allocator.KeeperSettings). Heartbeat, Margin, MaxClockOffset
// and MaxBackwardWait are the generator's own, whatever the server
// suggests.
type GeneratorOptions struct {
	// Token is the bearer token, with the leases scope.
	Token string
	// Datacenter is the datacenter ID, within the cluster's layout.
	Datacenter int64
	// Workers is the pool to lease from; nil means the server's whole pool.
	Workers *WorkerRange
	// TTL is the lease's ttl in whole ms; zero means allocator.DefaultLeaseTTL.
	TTL time.Duration
	// Heartbeat (at most TTL/2) and Margin (under TTL/2, off the local
	// deadline); zero means allocator.DefaultHeartbeat and DefaultMargin.
	Heartbeat, Margin time.Duration
	// Holder names this process ("api:<token name>/<holder>" on the
	// server): printable ASCII, no spaces; empty means host/pid/random.
	Holder string
	// MaxClockOffset is the largest offset from database time to issue at;
	// MaxBackwardWait the largest clock step back waited out. Zero means
	// the allocator and snowflake defaults.
	MaxClockOffset, MaxBackwardWait time.Duration
	// Clock is the wall clock the IDs carry; nil means the system's.
	Clock snowflake.Clock
	// Logger receives the lease's events; nil discards them.
	Logger     *slog.Logger
	HTTPClient *http.Client // nil means one of the generator's own
	UserAgent  string       // empty means "idgen-go-client"
	// NoWait returns from NewGenerator before a lease is held; Next
	// refuses with ErrNoLease until then.
	NoWait bool
}

// Generator makes Snowflake IDs in process under a worker lease held
// through the lease API, running an allocator.Keeper over a LeaseStore. It
// issues only inside the lease's fence and before its local deadline. Next
// and NextN make no request or allocation. Safe for concurrent use.
type Generator struct {
	keeper *allocator.Keeper
	store  *LeaseStore
}

// NewGenerator returns a generator leasing from baseURL: it reads the
// layout, starts the keeper and, unless opts.NoWait, waits for a lease.
// Errors: ErrInvalidInput for bad options; the server's *Error for a final
// refusal; ctx's error joined with the last failure when ctx ends first.
func NewGenerator(ctx context.Context, baseURL string, opts GeneratorOptions) (*Generator, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	store, err := NewLeaseStore(baseURL, LeaseStoreOptions{Token: opts.Token, HTTPClient: opts.HTTPClient, UserAgent: opts.UserAgent})
	if err != nil {
		return nil, err
	}
	store.serverPool = opts.Workers == nil
	layout, err := store.EnsureLayout(ctx, snowflake.Layout{})
	if err != nil {
		store.CloseIdleConnections()
		return nil, err
	}
	w := &watchedStore{LeaseStore: store, claims: make(chan error, 1)}
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

// validate checks what the keeper's settings do not.
func (o GeneratorOptions) validate() error {
	if o.TTL%time.Millisecond != 0 {
		return fmt.Errorf("%w: TTL %s is not a whole number of milliseconds", ErrInvalidInput, o.TTL)
	}
	if o.Holder != "" {
		if err := idgen.ValidHolder(o.Holder); err != nil {
			return fmt.Errorf("%w: Holder: %w", ErrInvalidInput, err)
		}
	}
	return nil
}

func (g *Generator) waitLease(ctx context.Context, claims <-chan error) error {
	var last error
	for {
		select {
		case err := <-claims:
			switch {
			case err == nil: // the keeper publishes the lease right after the claim
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

// watchedStore reports the outcome of each claim to NewGenerator.
type watchedStore struct {
	*LeaseStore
	claims chan error // the latest outcome; buffer of one
}

func (w *watchedStore) Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error) {
	res, err := w.LeaseStore.Claim(ctx, req)
	// Keep only the latest outcome; the keeper's loop is the one sender.
	select {
	case stale := <-w.claims:
		_ = stale // replaced by this outcome
	default:
	}
	w.claims <- err
	return res, err
}

// Next returns a Snowflake ID, or an error matching ErrUnavailable that
// says why the lease cannot be proven.
func (g *Generator) Next() (int64, error) {
	id, err := g.keeper.Next()
	if err != nil {
		return 0, refused(err)
	}
	return int64(id), nil
}

// NextN appends n IDs to dst, allocating nothing when dst has room; on an
// error, with those appended so far.
func (g *Generator) NextN(dst []int64, n int) ([]int64, error) {
	if n < 0 {
		return dst, fmt.Errorf("%w: count %d", ErrInvalidInput, n)
	}
	dst, _, err := g.keeper.NextSnowflakesFenced(dst, n)
	if err != nil {
		return dst, refused(err)
	}
	return dst, nil
}

// Ready returns nil when the generator can issue IDs now, else Next's error.
func (g *Generator) Ready() error {
	if err := g.keeper.Ready(); err != nil {
		return refused(err)
	}
	return nil
}

// Layout returns the cluster's Snowflake layout, which the IDs follow.
func (g *Generator) Layout() snowflake.Layout { return g.keeper.Layout() }

// Holder returns the holder name the generator sends.
func (g *Generator) Holder() string { return g.keeper.Holder() }

// Status returns a snapshot of the lease.
func (g *Generator) Status() allocator.KeeperStatus { return g.keeper.Status() }

// Close stops issuing and releases the lease with the last ID's timestamp,
// bounded by ctx; later calls return nil.
func (g *Generator) Close(ctx context.Context) error {
	err := g.keeper.Close(ctx)
	g.store.CloseIdleConnections()
	return err
}

// refused wraps a refusal of the keeper to match ErrUnavailable too.
func refused(err error) error { return &refusal{err: err} }

type refusal struct{ err error }

func (e *refusal) Error() string   { return "idgen generator: " + e.err.Error() }
func (e *refusal) Unwrap() []error { return []error{ErrUnavailable, e.err} }
