package app

import (
	"fmt"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/snowflake"
)

// Defaults of LeaseAPIConfig.
const (
	DefaultLeaseAPIMinTTL = 3 * time.Second
	DefaultLeaseAPIMaxTTL = 5 * time.Minute
)

// LeaseAPIConfig configures the lease API under /v1/leases, through which
// other processes hold worker-ID leases of this node's database
// (docs/leases.md). Zero fields mean their defaults. The node runs the
// lease calls on its own store, bounds every ceiling by store time + ttl +
// its own Keeper.MaxClockOffset, and tells holders its
// Keeper.MaxBackwardWait.
type LeaseAPIConfig struct {
	// MinTTL and MaxTTL bound the ttl a caller may ask for: at least
	// allocator.MinLeaseTTL, whole milliseconds, MinTTL <= MaxTTL. Defaults
	// DefaultLeaseAPIMinTTL [--lease-api-min-ttl] and DefaultLeaseAPIMaxTTL
	// [--lease-api-max-ttl]. The node's own --lease-ttl, brought within
	// them, is the ttl of a request that names none.
	MinTTL time.Duration
	MaxTTL time.Duration
}

// resolve returns l with its defaults filled in, or an error naming the
// flag whose value is refused.
func (l LeaseAPIConfig) resolve() (LeaseAPIConfig, error) {
	if l.MinTTL == 0 {
		l.MinTTL = DefaultLeaseAPIMinTTL
	}
	if l.MaxTTL == 0 {
		l.MaxTTL = DefaultLeaseAPIMaxTTL
	}
	switch {
	case l.MinTTL < allocator.MinLeaseTTL || l.MinTTL%time.Millisecond != 0:
		return LeaseAPIConfig{}, fmt.Errorf("invalid lease API minimum ttl %s (--lease-api-min-ttl): want whole milliseconds, at least %s",
			l.MinTTL, allocator.MinLeaseTTL)
	case l.MaxTTL < l.MinTTL || l.MaxTTL%time.Millisecond != 0:
		return LeaseAPIConfig{}, fmt.Errorf("invalid lease API maximum ttl %s (--lease-api-max-ttl): want whole milliseconds, at least --lease-api-min-ttl %s",
			l.MaxTTL, l.MinTTL)
	}
	return l, nil
}

// httpapi returns the lease API's configuration for the HTTP server: the
// node's store, and the bounds of the node's resolved configuration c.
func (l LeaseAPIConfig) httpapi(c Config, store httpapi.LeaseBroker) httpapi.LeaseAPIConfig {
	wait := c.Keeper.MaxBackwardWait
	if wait == 0 {
		wait = snowflake.DefaultMaxBackwardWait
	}
	return httpapi.LeaseAPIConfig{
		Store:           store,
		MinTTL:          l.MinTTL,
		MaxTTL:          l.MaxTTL,
		DefaultTTL:      min(max(c.Keeper.TTL.Truncate(time.Millisecond), l.MinTTL), l.MaxTTL),
		MaxClockOffset:  c.Keeper.MaxClockOffset,
		MaxBackwardWait: max(wait, 0),
	}
}
