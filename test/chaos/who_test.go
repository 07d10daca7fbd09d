//go:build chaos

package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/snowflake"
)

// whoSample is an ID whose issuer `idgen audit who` must name: the
// tenure the oracle attributes it to, or none (holder "").
type whoSample struct {
	what    string
	id      int64
	holder  string
	version int64
}

// checkWho runs `idgen audit who ID --dsn …` on a handful of the
// scenario's IDs and checks that it names the holder and fencing version
// the oracle attributes each to (Attributor): the first and last ID of
// every tenure of the worker IDs that were taken over (the stopped
// holder's last IDs before the takeover, the new holder's, the stopped
// holder's again after it got a worker back) and the first ID of one
// other tenure. Two IDs no one issued must get "no holder recorded": one
// of a worker ID no tenure ever had, at the time of the scenario, and one
// of a taken-over worker an hour after the scenario.
func (e *env) checkWho(draws []Draw, events []allocator.LeaseEvent, out *outcome) {
	samples, problem := whoSamples(draws, events, out.clockMin)
	if problem != "" {
		out.problem("%s", problem)
		return
	}
	var ok int
	for _, s := range samples {
		text, err := runIdgen(e.t, e.bin, "audit", "who", strconv.FormatInt(s.id, 10), "--dsn", e.db.dsn)
		if err != nil {
			out.problem("idgen audit who %d (%s): %v\n%s", s.id, s.what, err, text)
			continue
		}
		holder, version := parseWho(text)
		switch {
		case s.holder == "" && !strings.HasPrefix(holder, audit.NoHolder):
			out.problem("idgen audit who %d (%s): got holder %q, want %q:\n%s", s.id, s.what, holder, audit.NoHolder, text)
		case s.holder != "" && (holder != s.holder || version != s.version):
			out.problem("idgen audit who %d (%s): got %s at fencing version %d, want the oracle's %s at %d:\n%s",
				s.id, s.what, holder, version, s.holder, s.version, text)
		default:
			ok++
		}
		e.t.Logf("who %d (%s): %s v%d", s.id, s.what, holder, version)
	}
	out.note("who_checked=%d who_right=%d", len(samples), ok)
}

// parseWho reads the holder and fencing version from the output of idgen
// audit who (version -1 when the output has none).
func parseWho(text string) (holder string, version int64) {
	version = -1
	for _, line := range strings.Split(text, "\n") {
		key, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch key {
		case "holder":
			holder = rest
		case "fencing_version":
			if v, err := strconv.ParseInt(rest, 10, 64); err == nil {
				version = v
			}
		}
	}
	return holder, version
}

// whoSamples picks checkWho's IDs from the draws' first and last IDs, or
// says why the scenario's IDs cannot show a takeover.
func whoSamples(draws []Draw, events []allocator.LeaseEvent, clockMin map[string]time.Duration) ([]whoSample, string) {
	owner := Attributor(Input{Events: events, ClockOffsetMin: clockMin})
	layout := snowflake.DefaultLayout()
	type tenureKey struct {
		key     allocator.LeaseKey
		version int64
	}
	type span struct {
		t                   Tenure
		first, last         int64
		firstTime, lastTime int64
	}
	spans := map[tenureKey]*span{}
	var lastMS int64
	for i := range draws {
		d := &draws[i]
		if d.Status != 200 || d.Source == "segment" || len(d.IDs) == 0 {
			continue
		}
		for _, id := range []int64{d.IDs[0], d.IDs[len(d.IDs)-1]} {
			t, ok := owner(d, id)
			if !ok {
				continue
			}
			ms := layout.Decompose(snowflake.ID(id)).Time.UnixMilli()
			lastMS = max(lastMS, ms)
			k := tenureKey{t.Key, t.Version}
			s := spans[k]
			if s == nil {
				spans[k] = &span{t: t, first: id, last: id, firstTime: ms, lastTime: ms}
				continue
			}
			if ms < s.firstTime {
				s.first, s.firstTime = id, ms
			}
			if ms > s.lastTime {
				s.last, s.lastTime = id, ms
			}
		}
	}
	taken := map[allocator.LeaseKey]bool{}
	held := map[allocator.LeaseKey]bool{}
	for _, ev := range events {
		held[ev.LeaseKey] = true
		if ev.Kind == allocator.EventTakeover {
			taken[ev.LeaseKey] = true
		}
	}
	list := make([]*span, 0, len(spans))
	for _, s := range spans {
		list = append(list, s)
	}
	slices.SortFunc(list, func(a, b *span) int {
		return cmp.Or(cmp.Compare(a.t.Key.DatacenterID, b.t.Key.DatacenterID), cmp.Compare(a.t.Key.WorkerID, b.t.Key.WorkerID),
			cmp.Compare(a.t.Version, b.t.Version))
	})
	var samples []whoSample
	var before, after, other bool
	for _, s := range list {
		if !taken[s.t.Key] {
			if !other {
				other = true
				samples = append(samples, whoSample{fmt.Sprintf("first ID of %s's tenure, no takeover", s.t.Holder), s.first, s.t.Holder, s.t.Version})
			}
			continue
		}
		what := fmt.Sprintf("%s's tenure of worker %d/%d", s.t.Holder, s.t.Key.DatacenterID, s.t.Key.WorkerID)
		switch {
		case s.t.EndKind == allocator.EventTakeover:
			before = true
			what += ", taken over"
		case eventOf(s.t, events) == allocator.EventTakeover:
			after = true
			what += " by takeover"
		}
		samples = append(samples, whoSample{"first ID of " + what, s.first, s.t.Holder, s.t.Version},
			whoSample{"last ID of " + what, s.last, s.t.Holder, s.t.Version})
	}
	if !before || !after {
		return nil, fmt.Sprintf("no ID was issued both before a takeover (%v) and after it (%v): idgen audit who cannot be shown on this scenario", before, after)
	}
	// Nobody's: the highest worker ID of the layout, if no tenure had it,
	// at the scenario's last ID time; and a taken-over worker an hour on.
	never := allocator.LeaseKey{WorkerID: layout.MaxWorker()}
	if held[never] {
		return nil, fmt.Sprintf("worker %d was held: no worker ID is left that no one held", never.WorkerID)
	}
	for k := range taken {
		for _, n := range []struct {
			what string
			key  allocator.LeaseKey
			ms   int64
		}{
			{fmt.Sprintf("worker %d, never held", never.WorkerID), never, lastMS},
			{fmt.Sprintf("worker %d/%d an hour after the scenario", k.DatacenterID, k.WorkerID), k, lastMS + time.Hour.Milliseconds()},
		} {
			id, err := layout.Compose(snowflake.Parts{Timestamp: n.ms - layout.EpochMillis(), Datacenter: n.key.DatacenterID, Worker: n.key.WorkerID})
			if err != nil {
				return nil, fmt.Sprintf("compose an ID of %s: %v", n.what, err)
			}
			samples = append(samples, whoSample{what: n.what, id: int64(id)})
		}
		break
	}
	return samples, ""
}
