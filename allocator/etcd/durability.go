package etcd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

var _ allocator.DurabilityChecker = (*Store)(nil)

// Durability on etcd. No RPC reports --unsafe-no-fsync, but such a member
// never increments walFsyncMetric while appending, so CheckDurability
// writes one key and watches each voting member's counter.
const (
	walFsyncMetric = "etcd_disk_wal_fsync_duration_seconds_count"
	// fsyncWait is how long to wait for each member's fsync of the write.
	fsyncWait = 3 * time.Second
)

// memberProbe is what CheckDurability learnt of one voting member.
type memberProbe struct {
	name, url string
	before    float64 // WAL fsyncs before the write
	fsynced   bool    // the count rose after the write
	applied   int64   // the member's applied Raft index after the wait; -1 unknown
	err       error   // why the count or the index could not be read
}

// CheckDurability implements allocator.DurabilityChecker: it writes
// <prefix>meta/durability-probe; a voting member that applied it without
// an fsync is a risk, one unseen within fsyncWait a warning.
func (s *Store) CheckDurability(ctx context.Context) ([]allocator.DurabilityRisk, error) {
	list, err := s.cli.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd: check durability of %s: list members: %w", s.dsn, err)
	}
	var probes []*memberProbe
	for _, m := range list.Members {
		if m.IsLearner {
			continue // a learner acknowledges nothing
		}
		p := &memberProbe{name: m.Name, applied: -1}
		if p.name == "" {
			p.name = strconv.FormatUint(m.ID, 16)
		}
		if len(m.ClientURLs) == 0 {
			p.err = errors.New("member advertises no client URL")
		} else {
			p.url = m.ClientURLs[0]
			p.before, p.err = s.walFsyncs(ctx, p.url)
		}
		probes = append(probes, p)
	}

	if _, err := s.cli.Put(ctx, s.keys.probe(), time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return nil, fmt.Errorf("etcd: check durability of %s: write %s: %w", s.dsn, s.keys.probe(), noSpace(err))
	}
	// The write's Raft index is at most the highest reported commit index.
	var committed int64
	for _, p := range probes {
		if p.url == "" {
			continue
		}
		if st, err := s.cli.Status(ctx, p.endpoint()); err == nil {
			committed = max(committed, int64(st.RaftIndex))
		}
	}

	deadline := time.Now().Add(fsyncWait)
	for {
		waiting := false
		for _, p := range probes {
			if p.err != nil || p.fsynced {
				continue
			}
			n, err := s.walFsyncs(ctx, p.url)
			switch {
			case err != nil:
				p.err = err
			case n > p.before:
				p.fsynced = true
			default:
				waiting = true
			}
		}
		if !waiting || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("etcd: check durability of %s: %w", s.dsn, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, p := range probes {
		if p.err != nil || p.fsynced {
			continue
		}
		st, err := s.cli.Status(ctx, p.endpoint())
		if err != nil {
			p.err = err
			continue
		}
		p.applied = int64(st.RaftAppliedIndex)
	}
	return judgeDurability(probes, committed), nil
}

// judgeDurability turns the probes into risks: applied without an fsync is
// unsafe, unseen is a warning.
func judgeDurability(probes []*memberProbe, committed int64) []allocator.DurabilityRisk {
	var risks []allocator.DurabilityRisk
	for _, p := range probes {
		switch {
		case p.fsynced:
		case p.err == nil && committed > 0 && p.applied >= committed:
			risks = append(risks, allocator.DurabilityRisk{
				Setting: "unsafe-no-fsync",
				Value:   fmt.Sprintf("true on member %s (%s applied a write without an fsync of its WAL)", p.name, p.url),
				Fix:     fmt.Sprintf("restart etcd member %s without --unsafe-no-fsync", p.name),
			})
		default:
			why := "it had not applied the check's write"
			if p.err != nil {
				why = p.err.Error()
			}
			risks = append(risks, allocator.DurabilityRisk{
				Setting: "unsafe-no-fsync",
				Value:   fmt.Sprintf("unknown on member %s (%s)", p.name, why),
				Fix: fmt.Sprintf("make %s/metrics of member %s reachable from idgen so that the check sees its WAL fsyncs, "+
					"and make sure no member runs with --unsafe-no-fsync", p.url, p.name),
				Warning: true,
			})
		}
	}
	return risks
}

// endpoint returns the host:port of the member's client URL.
func (p *memberProbe) endpoint() string {
	_, hostPort, _ := strings.Cut(p.url, "://")
	return strings.TrimSuffix(hostPort, "/")
}

// walFsyncs returns the member's WAL fsync count from its /metrics.
func (s *Store) walFsyncs(ctx context.Context, clientURL string) (float64, error) {
	url := strings.TrimSuffix(clientURL, "/") + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("read %s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), walFsyncMetric+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			return 0, fmt.Errorf("read %s: %s holds %q", url, walFsyncMetric, rest)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", url, err)
	}
	return 0, fmt.Errorf("read %s: no %s", url, walFsyncMetric)
}
