package idgen

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// Limits of a draw.
const (
	// DefaultMaxCount is the default Settings.MaxCount.
	DefaultMaxCount = 10000
	// MaxCountLimit bounds Settings.MaxCount: an answer of this many IDs
	// adds about 40 MiB over HTTP, well inside a node's 256 MiB
	// (docs/benchmarks.md, "The largest request").
	MaxCountLimit = 1 << 18
	// MaxRequestBytes bounds every request body and message (gRPC as sent
	// and decompressed); larger ones are refused TooLarge.
	MaxRequestBytes = 64 << 10
)

// Snowflakes is the Snowflake ID source (*allocator.Keeper).
type Snowflakes interface {
	// NextSnowflakesFenced appends n IDs to dst with their lease, or an
	// error wrapping allocator.ErrUnavailable.
	NextSnowflakesFenced(dst []int64, n int) ([]int64, allocator.LeaseToken, error)
	// Layout returns the Snowflake layout of the IDs.
	Layout() snowflake.Layout
}

// Segments is the namespace ID source (*allocator.Segments).
type Segments interface {
	// Draw fills out with n IDs of namespace name.
	Draw(ctx context.Context, name string, n int, out *allocator.Batch) error
}

// Source says where drawn IDs came from.
type Source uint8

// The sources of IDs.
const (
	SourceSnowflake Source = iota // a Snowflake draw, under the node's lease
	SourceSegment                 // a namespace's counter
	SourceFallback                // a namespace's Snowflake fallback, its database unreachable
)

var sourceNames = [...]string{"snowflake", "segment", "fallback"}

// String returns "snowflake", "segment" or "fallback".
func (s Source) String() string { return sourceNames[s] }

// DrawRequest asks for IDs.
type DrawRequest struct {
	// Namespace names the namespace to draw from; "" draws Snowflake IDs.
	Namespace string
	// Count is how many IDs: 1 to the service's MaxCount.
	Count int
	// Format is the form a transport writes the IDs in (FormatAny: the
	// namespace's setting); drawing ignores it.
	Format snowflake.Format
}

// Drawn is a draw's outcome. Batch's slices are reused between draws, so
// a draw allocates nothing per ID; Ranges is for namespaces only.
type Drawn struct {
	allocator.Batch
	Source Source
}

// Settings configure a Service. Zero fields mean their defaults.
type Settings struct {
	// MaxCount is the largest draw, 1 to MaxCountLimit.
	MaxCount int
	// RateLimit limits each caller's IDs (limit.go).
	RateLimit RateLimit
	// Formats are the default ID forms by namespace ("" for Snowflake);
	// decimal without an entry.
	Formats map[string]snowflake.Format
	// now is the rate limit's clock (nil: monotonic); for tests.
	now func() time.Time
}

// Service draws IDs for every transport: it checks, rate-limits, draws,
// words refusals and counts. It starts no goroutine.
type Service struct {
	snowflakes Snowflakes
	segments   Segments
	maxCount   int
	limiter    *Limiter
	formats    map[string]snowflake.Format // a copy of Settings.Formats; nil when empty
	width      int                         // the Snowflake layout's width, read once
	issued     [len(sourceNames)]atomic.Int64
}

// NewService returns the service, or an error naming a bad field of s.
func NewService(snowflakes Snowflakes, segments Segments, s Settings) (*Service, error) {
	if s.MaxCount == 0 {
		s.MaxCount = DefaultMaxCount
	}
	if s.MaxCount < 1 || s.MaxCount > MaxCountLimit {
		return nil, fmt.Errorf("invalid Settings.MaxCount %d: want 1 to %d; a larger answer would not fit in a node's memory", s.MaxCount, MaxCountLimit)
	}
	if err := s.RateLimit.Validate(s.MaxCount); err != nil {
		return nil, err
	}
	if err := checkFormats(s.Formats); err != nil {
		return nil, err
	}
	svc := &Service{snowflakes: snowflakes, segments: segments, maxCount: s.MaxCount,
		limiter: newLimiter(s.RateLimit, s.MaxCount, s.now)}
	if len(s.Formats) > 0 {
		svc.formats = maps.Clone(s.Formats)
	}
	if snowflakes != nil {
		svc.width = snowflakes.Layout().Width()
	}
	return svc, nil
}

// MaxCount returns the largest count of one draw.
func (s *Service) MaxCount() int { return s.maxCount }

// Layout returns the Snowflake layout of the IDs.
func (s *Service) Layout() snowflake.Layout { return s.snowflakes.Layout() }

// Limiter returns the rate limiter, nil without a limit.
func (s *Service) Limiter() *Limiter { return s.limiter }

// Issued returns the IDs handed out from each source since start.
func (s *Service) Issued(src Source) int64 { return s.issued[src].Load() }

// Charge charges caller one ID for a call taking none (decode, admin).
func (s *Service) Charge(caller Caller) error { return s.limiter.Take(caller, 1) }

// Decode returns an ID's parts under the node's layout, charged as one
// ID. A negative id is Invalid.
func (s *Service) Decode(caller Caller, id int64) (snowflake.Parts, error) {
	if err := s.Charge(caller); err != nil {
		return snowflake.Parts{}, err
	}
	if id < 0 {
		return snowflake.Parts{}, Errorf(Invalid, "id %d is negative: a Snowflake ID is from 0 to %d", id, int64(1<<63-1))
	}
	if l := s.snowflakes.Layout(); snowflake.ID(id) > l.MaxID() {
		return snowflake.Parts{}, Errorf(Invalid, "id %d is above %d, the largest ID of this node's %d-bit layout", id, l.MaxID(), l.Width())
	}
	return s.snowflakes.Layout().Decompose(snowflake.ID(id)), nil
}

// CountError refuses a count that is not 1 to MaxCount, in every
// transport's words.
func (s *Service) CountError() error {
	return Errorf(Invalid, "count must be an integer from 1 to %d", s.maxCount)
}

// Check reports, as Invalid, a count outside 1..MaxCount or a malformed
// namespace. Transports decoding in parts call it before sending anything.
func (s *Service) Check(req DrawRequest) error {
	if req.Count < 1 || req.Count > s.maxCount {
		return s.CountError()
	}
	if req.Namespace != "" {
		if err := allocator.ValidNamespace(req.Namespace); err != nil {
			return &Error{Code: Invalid, Detail: err.Error()}
		}
	}
	return nil
}

// Draw takes req.Count IDs for caller into out, after Check and the rate
// limit, or returns an *Error serving none (IDs made before a refusal are
// dropped: nobody saw them).
func (s *Service) Draw(ctx context.Context, caller Caller, req DrawRequest, out *Drawn) error {
	if err := s.Check(req); err != nil {
		return err
	}
	if err := s.limiter.Take(caller, req.Count); err != nil {
		return err
	}
	if req.Namespace == "" {
		ids, tok, err := s.snowflakes.NextSnowflakesFenced(out.IDs[:0], req.Count)
		out.IDs, out.Ranges = ids[:0], out.Ranges[:0]
		if err != nil {
			return ErrorOf(err, "")
		}
		out.IDs, out.Lease, out.Revision = ids, tok, 0
		out.Batch.Source, out.Source = allocator.SourceSnowflake, SourceSnowflake
	} else {
		if err := s.segments.Draw(ctx, req.Namespace, req.Count, &out.Batch); err != nil {
			return ErrorOf(err, req.Namespace)
		}
		out.Source = SourceSegment
		if out.Batch.Source == allocator.SourceSnowflake {
			out.Source = SourceFallback
		}
	}
	s.issued[out.Source].Add(int64(len(out.IDs)))
	return nil
}
