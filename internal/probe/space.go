package probe

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

// SpaceTimeout bounds one sample of the database's space.
const SpaceTimeout = 5 * time.Second

// growthWindow is how far back the growth rate of the database looks.
const growthWindow = time.Minute

// SpaceAttention is the quota share needing attention.
const SpaceAttention = 0.6

// Space samples the database's space and alarms (etcd) for /metrics,
// /readyz and the status page; its owner calls Sample periodically. It
// logs alarm changes and passing SpaceAttention.
type Space struct {
	src   allocator.SpaceReporter
	log   *slog.Logger
	clock func() time.Time
	// compaction says who compacts the history, for the report.
	compaction Compaction

	mu      sync.Mutex
	report  SpaceReport
	samples []sizeSample // the last growthWindow, oldest first
	high    bool         // the size was past SpaceAttention at the last sample
	reads   FailureLog
}

type sizeSample struct {
	at   time.Time
	size int64
}

// Compaction says who keeps the database's history bounded.
type Compaction struct {
	// ByNode: this node compacts revisions older than Retention.
	ByNode    bool
	Retention time.Duration
	// Seen: a compaction by someone else has been seen.
	Seen bool
	// Text is the line /readyz and the status page show.
	Text string
}

// SpaceReport is the latest sample of the database's space.
type SpaceReport struct {
	// Sampled: at least one sample succeeded; the fields below are its.
	Sampled bool
	At      time.Time
	allocator.StoreSpace
	// Growth is the size's growth over the last minute, bytes per second.
	Growth float64
	// Err is why the latest sample failed; the figures are the last good.
	Err error
	// Compaction is who compacts the history.
	Compaction Compaction
}

// NoSpace reports the NOSPACE alarm: every write is refused.
func (r SpaceReport) NoSpace() bool { return slices.Contains(r.Alarms, "NOSPACE") }

// Share returns the size as a share of the quota; 0 without a quota.
func (r SpaceReport) Share() float64 {
	if r.Quota <= 0 {
		return 0
	}
	return float64(r.Size) / float64(r.Quota)
}

// UntilFull returns the time to the quota at the current growth.
func (r SpaceReport) UntilFull() (time.Duration, bool) {
	if r.Quota <= 0 || r.Growth <= 0 || r.Size >= r.Quota {
		return 0, false
	}
	return time.Duration(float64(r.Quota-r.Size) / r.Growth * float64(time.Second)), true
}

// AlarmText names the raised alarms and their meaning; "" when none.
func (r SpaceReport) AlarmText() string {
	var parts []string
	for _, a := range r.Alarms {
		switch a {
		case "NOSPACE":
			parts = append(parts, "NOSPACE: etcd's backend passed its quota (--quota-backend-bytes) and the cluster refuses every write; "+
				"compact the history, defragment every member and disarm the alarm (docs/operations.md)")
		case "CORRUPT":
			parts = append(parts, "CORRUPT: etcd found members whose data differ and refuses writes; see etcd's documentation on data corruption")
		default:
			parts = append(parts, a)
		}
	}
	return strings.Join(parts, "; ")
}

// NewSpace returns a Space of src; log and clock may be nil.
func NewSpace(src allocator.SpaceReporter, c Compaction, clock func() time.Time, log *slog.Logger) *Space {
	if clock == nil {
		clock = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Space{src: src, log: log, clock: clock, compaction: c, report: SpaceReport{Compaction: c}}
}

// Report returns the latest sample.
func (s *Space) Report() SpaceReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.report
	r.Alarms = slices.Clone(r.Alarms)
	return r
}

// Sample reads the database's space once, bounded by SpaceTimeout.
func (s *Space) Sample(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, SpaceTimeout)
	defer cancel()
	sp, err := s.src.Space(ctx)
	now := s.clock()
	s.reads.Note(s.log, "reading the database's space", err)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.report.Err = err
		return
	}
	prev := s.report
	s.samples = append(s.samples, sizeSample{now, sp.Size})
	for len(s.samples) > 2 && now.Sub(s.samples[1].at) >= growthWindow {
		s.samples = s.samples[1:]
	}
	r := SpaceReport{Sampled: true, At: now, StoreSpace: sp, Compaction: s.compaction}
	if first := s.samples[0]; now.Sub(first.at) > 0 {
		r.Growth = float64(sp.Size-first.size) / now.Sub(first.at).Seconds()
	}
	s.report = r

	was, is := strings.Join(prev.Alarms, ","), strings.Join(sp.Alarms, ",")
	switch {
	case is != "" && is != was:
		s.log.Error("database alarm raised", "alarms", is, "meaning", r.AlarmText(), "size", sp.Size, "quota", sp.Quota)
	case is == "" && was != "":
		s.log.Info("database alarms cleared", "was", was, "size", sp.Size, "quota", sp.Quota)
	}
	high := r.Share() >= SpaceAttention
	if high && !s.high {
		s.log.Warn(fmt.Sprintf("database past %.0f%% of its quota: compact and defragment before it refuses writes (docs/operations.md)", SpaceAttention*100),
			"size", sp.Size, "in_use", sp.InUse, "quota", sp.Quota, "growth_bytes_per_second", int64(r.Growth), "compaction", s.compaction.Text)
	}
	s.high = high
}
