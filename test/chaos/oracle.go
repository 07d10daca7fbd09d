package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// Draw is one request a load client made and what came back.
type Draw struct {
	Node      int    // index of the node asked
	Holder    string // the node's --holder, as it appears in lease_events
	Namespace string // "" for a Snowflake draw
	Count     int    // IDs asked for
	// Send is the wall clock just before the request was sent, Recv just
	// after the whole response was read. The ID was made in between.
	Send, Recv time.Time
	Status     int    // HTTP status; 0 for a transport error (refused, reset, timeout)
	Source     string // "snowflake" or "segment", from the response
	IDs        []int64
}

// Tenure is one holder's hold on one worker ID, rebuilt from lease_events:
// from the claim (acquire or takeover) at fencing version Version until the
// next claim of the row, the holder's release, or the holder's report that it
// lost the lease, whichever comes first.
type Tenure struct {
	Key     allocator.LeaseKey
	Holder  string
	Version int64
	Start   time.Time           // database time of the claim
	End     time.Time           // zero while the tenure was still open when the history was read
	EndKind allocator.EventKind // the event that ended it: acquire, takeover, release or lost
}

// BuildTenures rebuilds the tenures of every worker ID from lease events,
// ordered by worker and fencing version.
//
// Why these bounds are sound (every time is database time, taken inside the
// transaction that wrote the event, on the same host as the harness):
//   - Start: the claim's event is written in the claim's transaction, before
//     it commits; the node cannot issue before it learns of the commit.
//   - End by a later claim: a claim of a held row requires expires_at <= now()
//     (or the same holder claiming again after a restart), and expires_at is
//     database time at the holder's last successful heartbeat plus the ttl,
//     while the holder's own deadline is its monotonic time *before* sending
//     that heartbeat plus the ttl minus a margin. So the old holder had
//     stopped before the new claim's time.
//   - End by release or lost: the keeper stops its generator before it
//     releases, and before it records the loss.
//   - A release ends a tenure even when the next claim's time is earlier.
//     On PostgreSQL now() is the time of BEGIN, not of the claim's first
//     statement: a claim whose BEGIN came before the release and whose
//     snapshot came after its commit finds the row free and records a
//     time before the release (seen with a node behind a slow proxy). The
//     bound by a later claim rests on expires_at <= now(), which a claim of
//     a released row does not need; only a release's own time bounds it.
//
// On etcd the events are keys read through the same store calls, and the
// same bounds hold with etcd's expiry: a claim finds a held worker ID free
// only once etcd has expired the holder key's lease, which etcd renewed at
// the holder's last successful heartbeat, after the holder took the
// monotonic reading its deadline counts from, for at least the ttl; the
// claim's time is store time read after it saw the key gone (the members'
// clocks, this host's, so comparable with the clients' times).
func BuildTenures(events []allocator.LeaseEvent) []Tenure {
	type idx struct {
		key     allocator.LeaseKey
		version int64
	}
	var tenures []Tenure
	for _, ev := range events {
		if ev.Kind == allocator.EventAcquire || ev.Kind == allocator.EventTakeover {
			tenures = append(tenures, Tenure{Key: ev.LeaseKey, Holder: ev.Holder, Version: ev.FencingVersion, Start: ev.At})
		}
	}
	slices.SortFunc(tenures, func(a, b Tenure) int {
		return cmp.Or(cmp.Compare(a.Key.DatacenterID, b.Key.DatacenterID),
			cmp.Compare(a.Key.WorkerID, b.Key.WorkerID), cmp.Compare(a.Version, b.Version))
	})
	byVersion := make(map[idx]int, len(tenures))
	for i, t := range tenures {
		byVersion[idx{t.Key, t.Version}] = i
	}
	end := func(i int, at time.Time, kind allocator.EventKind) {
		if tenures[i].End.IsZero() || at.Before(tenures[i].End) {
			tenures[i].End, tenures[i].EndKind = at, kind
		}
	}
	for i := range tenures {
		if i+1 < len(tenures) && tenures[i+1].Key == tenures[i].Key {
			end(i, tenures[i+1].Start, eventOf(tenures[i+1], events))
		}
	}
	for _, ev := range events {
		if ev.Kind != allocator.EventRelease && ev.Kind != allocator.EventLost {
			continue
		}
		i, ok := byVersion[idx{ev.LeaseKey, ev.FencingVersion}]
		if !ok || tenures[i].Holder != ev.Holder {
			continue
		}
		if ev.Kind == allocator.EventRelease {
			tenures[i].End, tenures[i].EndKind = ev.At, ev.Kind
		} else {
			end(i, ev.At, ev.Kind)
		}
	}
	return tenures
}

// describeTenures lists the tenures at the given indexes, one
// "holder vN start..end (kind)" each, for a failure's example.
func describeTenures(tenures []Tenure, at []int) string {
	var b strings.Builder
	for _, i := range at {
		t := tenures[i]
		end := "open"
		if !t.End.IsZero() {
			end = t.End.Format("15:04:05.000000") + " (" + string(t.EndKind) + ")"
		}
		fmt.Fprintf(&b, "%s v%d %s..%s; ", t.Holder, t.Version, t.Start.Format("15:04:05.000000"), end)
	}
	return b.String()
}

// eventOf returns the kind of the claim event that started t.
func eventOf(t Tenure, events []allocator.LeaseEvent) allocator.EventKind {
	for _, ev := range events {
		if ev.LeaseKey == t.Key && ev.FencingVersion == t.Version &&
			(ev.Kind == allocator.EventAcquire || ev.Kind == allocator.EventTakeover) {
			return ev.Kind
		}
	}
	return allocator.EventAcquire
}

// Input is everything the oracle judges.
type Input struct {
	Layout snowflake.Layout // the zero Layout means the default one
	Draws  []Draw
	Events []allocator.LeaseEvent // the whole lease_events table after the run
	// ClockOffsetMin is, per holder, the most negative wall clock offset the
	// node ran with (--test-clock-offset or --test-clock-file); a missing
	// holder ran with none. Offsets must not be positive: see Check.
	ClockOffsetMin map[string]time.Duration
	// MaxID is, per namespace, the committed max_id read after the run.
	MaxID map[string]int64
	// Strict names the namespaces in strict mode, which must be gap-free and
	// monotonic in real time.
	Strict map[string]bool
	// Slack is the tolerance of timestamp comparisons for millisecond
	// rounding; zero means 1 ms.
	Slack time.Duration
}

// Report is the oracle's verdict.
type Report struct {
	Requests        int64         // requests made
	Attempted       int64         // IDs asked for, over all requests
	Acknowledged    int64         // IDs received in 200 responses
	OKRequests      int64         // 200 responses
	Unavailable503  int64         // 503 responses
	TransportErrors int64         // no HTTP response at all
	OtherStatus     map[int]int64 // any other status

	Duplicates int64 // IDs received more than once (each extra copy counts)

	// Foreign is the sum of the four kinds of IDs that no lease or committed
	// range accounts for.
	Foreign int64
	// NoTenure: Snowflake IDs whose worker the serving node's holder did not
	// hold at any time between the request's send and receive times.
	NoTenure int64
	// OutsideTenure: Snowflake IDs whose holder held the worker during the
	// request, but whose timestamp lies outside what that tenure could
	// issue: above the tenure's end (the ceiling reasoning) or below its
	// start shifted by the node's most negative clock offset.
	OutsideTenure int64
	// FenceOverlap: Snowflake IDs whose timestamp is not above every
	// timestamp issued under an earlier tenure of the same worker ID.
	FenceOverlap int64
	// Uncommitted: segment IDs above the namespace's committed max_id.
	Uncommitted int64

	Ambiguous int64 // Snowflake IDs that fit two tenures (not fence-checked)

	// StrictGaps counts the IDs missing from a strict namespace's run up
	// to its committed max_id beyond StrictUnanswered: a request that got
	// no answer (transport error or 5xx) may have had its fetch commit, and
	// those IDs are never handed out, so they may be missing; any other
	// missing ID is a gap.
	StrictGaps       int64
	StrictMissing    int64 // IDs missing from strict namespaces' runs, explained or not
	StrictUnanswered int64 // IDs asked for by strict requests with no answer (transport error or 5xx)
	StrictOrder      int64 // strict draws that were not above a draw completed before they started

	Examples []string // the first violations, described
}

// Failed reports whether the run broke a guarantee.
func (r Report) Failed() bool {
	return r.Duplicates > 0 || r.Foreign > 0 || r.StrictGaps > 0 || r.StrictOrder > 0
}

func (r *Report) example(format string, args ...any) {
	if len(r.Examples) < 10 {
		r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
	}
}

// Check runs the oracle:
//
//   - Uniqueness: every Snowflake ID (including the fallback's) appears once
//     over all responses; every ID of a namespace appears once within it.
//   - Ownership: each Snowflake ID (datacenter D, worker W, timestamp T) from
//     the node with holder H needs a tenure of (D, W) by H that overlaps the
//     request's [Send, Recv] and could have produced T: T <= the tenure's End
//     (a holder's ceiling is its wall clock at a heartbeat plus the ttl, at
//     most the database's time of that heartbeat plus the ttl when its clock
//     is not ahead, which is the row's expires_at, which precedes any later
//     claim; releases and losses happen after the generator stopped), and T
//     >= Start + the holder's most negative clock offset. Clock offsets must
//     therefore be <= 0 (a node set back, never forward).
//   - Fencing: under tenures of one worker ordered by fencing version,
//     timestamps strictly increase from one tenure to the next (a new
//     holder starts above the previous holder's ceiling).
//   - Segments: no ID above the committed max_id; strict namespaces have no
//     gaps up to max_id (but as many IDs as requests without an answer
//     asked for, see Report.StrictGaps), and a strict draw that starts
//     after another completed gets higher IDs.
func Check(in Input) Report {
	layout := in.Layout
	if layout.IsZero() {
		layout = snowflake.DefaultLayout()
	}
	slack := in.Slack
	if slack == 0 {
		slack = time.Millisecond
	}
	r := Report{OtherStatus: map[int]int64{}}

	var snow []int64
	perNS := map[string][]int64{}
	for i := range in.Draws {
		d := &in.Draws[i]
		r.Requests++
		r.Attempted += int64(d.Count)
		switch d.Status {
		case 200:
			r.OKRequests++
			r.Acknowledged += int64(len(d.IDs))
			if d.Source != "segment" {
				snow = append(snow, d.IDs...)
			}
			if d.Namespace != "" {
				perNS[d.Namespace] = append(perNS[d.Namespace], d.IDs...)
			}
		case 503:
			r.Unavailable503++
		case 0:
			r.TransportErrors++
		default:
			r.OtherStatus[d.Status]++
		}
	}

	r.Duplicates += countDuplicates(&r, "snowflake", snow)
	for _, ns := range sortedKeys(perNS) {
		ids := perNS[ns]
		r.Duplicates += countDuplicates(&r, "namespace "+ns, ids)
		if maxID, ok := in.MaxID[ns]; ok {
			for _, id := range ids {
				if id > maxID {
					r.Uncommitted++
					r.example("namespace %s: ID %d above the committed max_id %d", ns, id, maxID)
				}
			}
		}
		if in.Strict[ns] {
			checkStrict(&r, ns, ids, in.MaxID, in.Draws)
		}
	}

	checkOwnership(&r, layout, slack, in)
	r.Foreign = r.NoTenure + r.OutsideTenure + r.FenceOverlap + r.Uncommitted
	return r
}

// countDuplicates sorts ids in place and returns how many are extra copies.
func countDuplicates(r *Report, what string, ids []int64) int64 {
	slices.Sort(ids)
	var dups int64
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			dups++
			if dups <= 3 {
				r.example("%s: ID %d issued more than once", what, ids[i])
			}
		}
	}
	return dups
}

// checkStrict checks a strict namespace: ids (sorted) must cover
// min..max_id without gaps, and draws must be ordered in real time.
func checkStrict(r *Report, ns string, ids []int64, maxIDs map[string]int64, draws []Draw) {
	if len(ids) == 0 {
		return
	}
	uniq := slices.Compact(slices.Clone(ids))
	top := uniq[len(uniq)-1]
	if m, ok := maxIDs[ns]; ok && m > top {
		top = m
	}
	var unanswered int64
	for i := range draws {
		if d := &draws[i]; d.Namespace == ns && (d.Status == 0 || d.Status >= 500) {
			unanswered += int64(d.Count)
		}
	}
	r.StrictUnanswered += unanswered
	if missing := top - uniq[0] + 1 - int64(len(uniq)); missing > 0 {
		r.StrictMissing += missing
		if gaps := missing - unanswered; gaps > 0 {
			r.StrictGaps += gaps
			r.example("strict namespace %s: %d IDs missing between %d and %d, %d more than requests without an answer asked for",
				ns, missing, uniq[0], top, gaps)
		}
	}
	var ok []*Draw
	for i := range draws {
		if d := &draws[i]; d.Namespace == ns && d.Status == 200 && d.Source == "segment" && len(d.IDs) > 0 {
			ok = append(ok, d)
		}
	}
	bySend := slices.Clone(ok)
	slices.SortFunc(bySend, func(a, b *Draw) int { return a.Send.Compare(b.Send) })
	byRecv := slices.Clone(ok)
	slices.SortFunc(byRecv, func(a, b *Draw) int { return a.Recv.Compare(b.Recv) })
	var done int
	var highest int64 = -1 << 63
	for _, d := range bySend {
		for done < len(byRecv) && byRecv[done].Recv.Before(d.Send) {
			highest = max(highest, slices.Max(byRecv[done].IDs))
			done++
		}
		if lo := slices.Min(d.IDs); lo <= highest {
			r.StrictOrder++
			r.example("strict namespace %s: draw sent at %s got %d, not above %d handed out before it was sent",
				ns, d.Send.Format(time.RFC3339Nano), lo, highest)
		}
	}
}

// owners matches Snowflake IDs to the tenures that issued them, by the
// ownership rule of Check.
type owners struct {
	layout  snowflake.Layout
	slackMS int64
	offsets map[string]time.Duration // Input.ClockOffsetMin
	tenures []Tenure
	byKey   map[allocator.LeaseKey][]int
}

func newOwners(layout snowflake.Layout, slack time.Duration, in Input) *owners {
	o := &owners{layout: layout, slackMS: max(slack.Milliseconds(), 1), offsets: in.ClockOffsetMin,
		tenures: BuildTenures(in.Events), byKey: map[allocator.LeaseKey][]int{}}
	for i, t := range o.tenures {
		o.byKey[t.Key] = append(o.byKey[t.Key], i)
	}
	return o
}

// match returns the ID's parts, how many tenures of its worker d's holder
// held during the request (timely), how many of those could have issued
// its timestamp (fits), and the index of the last that could (found, -1
// if none).
func (o *owners) match(d *Draw, id int64) (p snowflake.Parts, timely, fits, found int) {
	p = o.layout.Decompose(snowflake.ID(id))
	key := allocator.LeaseKey{DatacenterID: p.Datacenter, WorkerID: p.Worker}
	tms := p.Time.UnixMilli()
	off := o.offsets[d.Holder].Milliseconds()
	found = -1
	for _, i := range o.byKey[key] {
		t := &o.tenures[i]
		if t.Holder != d.Holder || t.Start.After(d.Recv) || (!t.End.IsZero() && t.End.Before(d.Send)) {
			continue
		}
		timely++
		if tms < t.Start.UnixMilli()+off-o.slackMS {
			continue
		}
		if !t.End.IsZero() && tms > t.End.UnixMilli()+o.slackMS {
			continue
		}
		fits++
		found = i
	}
	return p, timely, fits, found
}

// Attributor returns what names the tenure that issued a Snowflake ID of
// a draw, by the ownership rule of Check on in's lease history (and
// in.ClockOffsetMin, in.Layout): ok is false when no tenure, or more than
// one, accounts for the ID.
func Attributor(in Input) func(d *Draw, id int64) (t Tenure, ok bool) {
	layout := in.Layout
	if layout.IsZero() {
		layout = snowflake.DefaultLayout()
	}
	o := newOwners(layout, cmp.Or(in.Slack, time.Millisecond), in)
	return func(d *Draw, id int64) (Tenure, bool) {
		if _, _, fits, found := o.match(d, id); fits == 1 {
			return o.tenures[found], true
		}
		return Tenure{}, false
	}
}

// checkOwnership matches every Snowflake ID to a tenure and checks fencing.
func checkOwnership(r *Report, layout snowflake.Layout, slack time.Duration, in Input) {
	o := newOwners(layout, slack, in)
	tenures, byKey := o.tenures, o.byKey
	// assign returns the index of the one tenure that accounts for the ID,
	// -1 if none does, -2 if several do. It counts the misses.
	assign := func(d *Draw, id int64, count bool) int {
		p, timely, fits, found := o.match(d, id)
		key := allocator.LeaseKey{DatacenterID: p.Datacenter, WorkerID: p.Worker}
		// miss counts an ID no tenure accounts for in counter, with an
		// example: format takes the ID, its worker and time, the holder
		// twice and the request's send and receive times.
		miss := func(counter *int64, format string) int {
			if count {
				*counter++
				r.example(format, id, p.Datacenter, p.Worker, p.Time.Format(time.RFC3339Nano), d.Holder, d.Holder,
					d.Send.Format(time.RFC3339Nano), d.Recv.Format(time.RFC3339Nano))
			}
			return -1
		}
		switch {
		case timely == 0:
			if count {
				// The holder's tenures of the key, to see which bound missed.
				r.example("  tenures of worker %d/%d: %s", p.Datacenter, p.Worker, describeTenures(tenures, byKey[key]))
			}
			return miss(&r.NoTenure, "ID %d (worker %d/%d, %s) from %s: %s held no tenure of it between %s and %s")
		case fits == 0:
			return miss(&r.OutsideTenure, "ID %d (worker %d/%d, timestamp %s) from %s: outside every tenure of %s covering the request %s..%s")
		case fits > 1:
			if count {
				r.Ambiguous++
			}
			return -2
		}
		return found
	}

	// First pass: match, count misses, and note each tenure's highest
	// timestamp.
	maxTS := make([]int64, len(tenures))
	for i := range maxTS {
		maxTS[i] = -1 << 63
	}
	for di := range in.Draws {
		d := &in.Draws[di]
		if d.Status != 200 || d.Source == "segment" {
			continue
		}
		for _, id := range d.IDs {
			if i := assign(d, id, true); i >= 0 {
				maxTS[i] = max(maxTS[i], layout.Decompose(snowflake.ID(id)).Time.UnixMilli())
			}
		}
	}
	// before[i] is the highest timestamp issued under an earlier tenure of
	// the same worker ID.
	before := make([]int64, len(tenures))
	for _, idxs := range byKey {
		highest := int64(-1 << 63)
		for _, i := range idxs { // by fencing version
			before[i] = highest
			highest = max(highest, maxTS[i])
		}
	}
	// Second pass: fencing.
	for di := range in.Draws {
		d := &in.Draws[di]
		if d.Status != 200 || d.Source == "segment" {
			continue
		}
		for _, id := range d.IDs {
			i := assign(d, id, false)
			if i < 0 {
				continue
			}
			if tms := layout.Decompose(snowflake.ID(id)).Time.UnixMilli(); tms <= before[i] {
				r.FenceOverlap++
				r.example("ID %d from %s (worker %d, version %d): timestamp %d ms not above %d ms issued under an earlier tenure",
					id, d.Holder, tenures[i].Key.WorkerID, tenures[i].Version, tms, before[i])
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// FirstOK returns the Recv time of the first 200 response from node (any
// node when node < 0) to a request sent at or after from, for namespace ns
// ("" for Snowflake draws, "*" for any).
func FirstOK(draws []Draw, node int, ns string, from time.Time) (time.Time, bool) {
	var best time.Time
	for i := range draws {
		d := &draws[i]
		if d.Status != 200 || (node >= 0 && d.Node != node) || d.Send.Before(from) || (ns != "*" && d.Namespace != ns) {
			continue
		}
		if best.IsZero() || d.Recv.Before(best) {
			best = d.Recv
		}
	}
	return best, !best.IsZero()
}
