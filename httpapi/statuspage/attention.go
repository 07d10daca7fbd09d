package statuspage

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/probe"
)

// severity ranks a notice: critical (IDs refused, or uniqueness at risk)
// before warning (critical unless someone acts).
type severity int

const (
	critical severity = iota
	warning
)

type notice struct {
	Severity      severity
	Title, Detail string
}

// Class is the notice's CSS class.
func (n notice) Class() string {
	if n.Severity == critical {
		return "critical"
	}
	return "warning"
}

// Thresholds of the notices.
const (
	// poolLowShare: a datacenter with at most this share free is almost full.
	poolLowShare = 0.1
	// exhaustionSteps: fewer IDs left than this many ranges is near the end.
	exhaustionSteps = 10
)

type attentionInput struct {
	Status                       allocator.KeeperStatus
	ReadyErr                     error
	DatabaseOK                   bool
	Database, Durability         string // the ping's error; the check at start
	LeaseTTL, MaxClockOffset     time.Duration
	LeasesError, NamespacesError string
	Pools                        []workerPool
	Namespaces                   []namespaceRow
	HeartbeatFails, Lost         int64 // counted by the history over Window
	Window                       time.Duration
	HideNames                    bool               // count the namespaces, for a page without details
	Space                        *probe.SpaceReport // nil for a store that cannot say
}

// attention returns in's notices, critical first, causes before effects.
func attention(in attentionInput) []notice {
	var out []notice
	add := func(s severity, title, detail string) {
		out = append(out, notice{Severity: s, Title: title, Detail: detail})
	}
	st := in.Status

	if in.ReadyErr != nil {
		add(critical, "Not ready: Snowflake IDs are refused (503)", in.ReadyErr.Error())
	}
	if sp := in.Space; sp != nil {
		spaceNotices(*sp, add)
	}
	if !in.DatabaseOK {
		add(critical, "Database unreachable",
			"Inside its lease the node keeps serving Snowflake IDs; namespaces serve what their buffers hold. "+in.Database)
	}
	switch d := in.Durability; {
	case strings.HasPrefix(d, "unsafe"):
		add(critical, "Durability check overridden",
			"The database can lose commits it acknowledged, and a crash could hand out the same IDs twice: "+d)
	case strings.HasSuffix(d, "(overridden)"):
		add(critical, "Durability check overridden",
			"The database's durability could not be checked and the node serves anyway; if it can lose acknowledged commits, a crash could hand out the same IDs twice: "+d)
	case d != "" && d != "ok":
		add(warning, "Durability not fully checked", d)
	}
	if off, limit := st.ClockOffset.Abs(), in.MaxClockOffset; limit > 0 && off > limit/2 {
		detail := fmt.Sprintf("This node's clock is %s from database time; beyond %s it refuses to issue.", fmtOffset(st.ClockOffset), limit)
		if off > limit {
			add(critical, "Clock offset beyond the limit", detail)
		} else {
			add(warning, "Clock offset large", detail)
		}
	}
	if st.Held && in.ReadyErr == nil && in.LeaseTTL > 0 && st.ValidFor < in.LeaseTTL/2 {
		add(warning, "Lease expiring",
			fmt.Sprintf("The lease is valid for %s more, less than half its TTL of %s: a heartbeat is overdue.",
				max(st.ValidFor, 0).Round(time.Millisecond), in.LeaseTTL))
	}
	// A page without details counts the namespaces of each notice.
	counted := map[string]int{}
	var countOrder []notice
	addNS := func(sv severity, ns namespaceRow, what, detail string) {
		if !in.HideNames {
			add(sv, "Namespace "+ns.Name+": "+what, detail)
			return
		}
		if counted[what] == 0 {
			countOrder = append(countOrder, notice{Severity: sv, Title: what})
		}
		counted[what]++
	}
	for _, ns := range in.Namespaces {
		switch {
		case ns.Used && ns.Failing && ns.Runway == 0:
			addNS(critical, ns, "fetches failing, buffer empty",
				"Requests for it wait and then fail"+fallbackNote(ns)+".")
		case ns.Used && ns.Failing:
			addNS(warning, ns, "fetches failing",
				fmt.Sprintf("%s IDs left in this node's buffers.", formatCount(ns.Runway)))
		}
	}
	for _, ns := range in.Namespaces {
		switch {
		case ns.Remaining == 0:
			addNS(critical, ns, "exhausted",
				fmt.Sprintf("max_id %d has reached its limit %d; no range can be fetched.", ns.MaxID, ns.Limit))
		case ns.Remaining < exhaustionSteps*max(ns.MaxStep, 1):
			addNS(warning, ns, "close to its limit",
				fmt.Sprintf("%s IDs left before %s %d, fewer than %d ranges of max_step %d.",
					formatCount(ns.Remaining), limitName(ns), ns.Limit, exhaustionSteps, ns.MaxStep))
		}
	}
	for _, n := range countOrder {
		add(n.Severity, fmt.Sprintf("%s: %s", plural(int64(counted[n.Title]), "namespace"), n.Title),
			"Which ones, and their figures, the page shows to a request with a token of the admin scope.")
	}
	for _, p := range in.Pools {
		switch free := len(p.Free); {
		case free == 0:
			add(warning, fmt.Sprintf("Datacenter %d: no worker ID free", p.Datacenter),
				p.FreeText()+": another node of this pool cannot start.")
		case float64(free) <= poolLowShare*float64(p.Total):
			add(warning, fmt.Sprintf("Datacenter %d: worker pool almost full", p.Datacenter), p.FreeText()+".")
		}
	}
	if in.Lost > 0 {
		add(warning, "Lease lost", fmt.Sprintf("%d leases lost in the last %s.", in.Lost, fmtSpan(in.Window)))
	}
	if in.HeartbeatFails > 0 {
		add(warning, "Heartbeats failing", fmt.Sprintf("%d heartbeats failed in the last %s.", in.HeartbeatFails, fmtSpan(in.Window)))
	}
	if in.LeasesError != "" {
		add(warning, "Cannot read the lease table", in.LeasesError)
	}
	if in.NamespacesError != "" {
		add(warning, "Cannot read the namespaces", in.NamespacesError)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Severity < out[j].Severity })
	return out
}

// spaceAhead: a quota reached within this time needs attention.
const spaceAhead = 24 * time.Hour

// spaceNotices adds the space notices: a raised alarm (critical), a size
// past probe.SpaceAttention or full within spaceAhead, and an uncompacted
// history (warnings).
func spaceNotices(sp probe.SpaceReport, add func(severity, string, string)) {
	if sp.NoSpace() {
		add(critical, "Database out of space: etcd raised the NOSPACE alarm",
			"etcd refuses every write, so no node can renew its lease or fetch a range. "+
				"Compact the history (etcdctl compact), defragment every member (etcdctl defrag --cluster) and disarm the alarm "+
				"(etcdctl alarm disarm); the nodes serve again by themselves. See docs/operations.md. "+spaceText(sp))
	}
	for _, a := range sp.Alarms {
		if a != "NOSPACE" {
			add(critical, "Database alarm raised: "+a, sp.AlarmText())
		}
	}
	if sp.NoSpace() || !sp.Sampled {
		return
	}
	share := sp.Share()
	until, growing := sp.UntilFull()
	switch {
	case share >= probe.SpaceAttention:
		add(warning, fmt.Sprintf("Database at %.0f%% of its quota", share*100),
			"etcd refuses every write once its backend passes the quota (the NOSPACE alarm). "+
				"Compact and defragment (docs/operations.md), or raise --quota-backend-bytes. "+spaceText(sp))
	case growing && until < spaceAhead:
		add(warning, "Database growing toward its quota",
			fmt.Sprintf("At its growth of the last minute it reaches the quota in about %s. ", fmtSpan(until.Round(time.Minute)))+spaceText(sp))
	}
	if c := sp.Compaction; !c.ByNode && !c.Seen && c.Text != "" {
		add(warning, "etcd history never compacted",
			"etcd keeps every revision until it is compacted, and idgen writes one per segment fetch and heartbeat: "+
				"start etcd with --auto-compaction-mode=periodic --auto-compaction-retention=5m, "+
				"or let idgen compact the whole cluster with --etcd-compact-retention 5m.")
	}
}

// spaceText describes the database's size, quota, use and growth.
func spaceText(sp probe.SpaceReport) string {
	if !sp.Sampled {
		if sp.Err != nil {
			return "Its size could not be read."
		}
		return ""
	}
	s := "Backend " + fmtBytes(sp.Size)
	if sp.Quota > 0 {
		s += fmt.Sprintf(" of a %s quota (%.0f%%)", fmtBytes(sp.Quota), sp.Share()*100)
	}
	s += ", " + fmtBytes(sp.InUse) + " in use"
	if sp.Growth > 0 {
		s += ", growing " + fmtBytes(int64(sp.Growth)) + "/s"
	}
	return s + "."
}

// fmtBytes writes n in decimal units: 950 B, 14.7 MB, 2.1 GB.
func fmtBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}

func fallbackNote(ns namespaceRow) string {
	if ns.Fallback == string(allocator.FallbackSnowflake) {
		return ", unless the Snowflake fallback serves them"
	}
	return ""
}

func limitName(ns namespaceRow) string {
	if ns.MaxIDLimit > 0 {
		return "max_id_limit"
	}
	return "the largest int64"
}

// fmtOffset writes a clock offset with its sign.
func fmtOffset(d time.Duration) string {
	s := d.Round(time.Millisecond).String()
	if d > 0 {
		return "+" + s
	}
	return s
}

// workerPool is one datacenter's lease rows; a worker ID is free when
// unheld or expired by database time.
type workerPool struct {
	Datacenter int64
	Total      int
	Free       []int64 // ascending
	Expired    []int64 // the free ones with a holder whose lease expired
	Held       int
}

// FreeText summarises the pool: "27 of 32 free: 5–31".
func (p workerPool) FreeText() string {
	s := fmt.Sprintf("%d of %d free", len(p.Free), p.Total)
	if len(p.Free) > 0 {
		s += ": " + compressRanges(p.Free)
	}
	return s
}

// ExpiredText lists the free worker IDs whose lease expired.
func (p workerPool) ExpiredText() string { return compressRanges(p.Expired) }

// workerPools groups leases (in ListLeases order) by datacenter.
func workerPools(leases []allocator.Lease, dbNow time.Time) []workerPool {
	var out []workerPool
	for _, l := range leases {
		if len(out) == 0 || out[len(out)-1].Datacenter != l.DatacenterID {
			out = append(out, workerPool{Datacenter: l.DatacenterID})
		}
		p := &out[len(out)-1]
		p.Total++
		switch {
		case leaseLive(l, dbNow):
			p.Held++
		case l.Holder != "":
			p.Free = append(p.Free, l.WorkerID)
			p.Expired = append(p.Expired, l.WorkerID)
		default:
			p.Free = append(p.Free, l.WorkerID)
		}
	}
	return out
}

// leaseLive reports whether l is held and unexpired at database time dbNow.
func leaseLive(l allocator.Lease, dbNow time.Time) bool {
	return l.Holder != "" && l.ExpiresAt.After(dbNow)
}

// compressRanges writes IDs as ascending ranges: 0–3, 5, 7–31.
func compressRanges(ids []int64) string {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	var b strings.Builder
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(ids[i], 10))
		if j > i {
			b.WriteString("–")
			b.WriteString(strconv.FormatInt(ids[j], 10))
		}
		i = j + 1
	}
	return b.String()
}
