//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

// abuseRequestPrefix starts the X-Request-ID of every request of the
// abusing caller, so that the lease events it caused can be told apart.
const abuseRequestPrefix = "abuse-"

// abuser is a caller with the leases scope (the generators' own token)
// that tries, in a loop, to act on leases that are not its own with every
// body the trust-boundary review found or a holder could get wrong. It
// reads the lease table as the status page shows it: every holder name and
// fencing version.
type abuser struct {
	e     *env
	nodes []*node
	stopC chan struct{}
	doneC chan struct{}
	seq   atomic.Int64

	mu       sync.Mutex // guards statuses and accepted
	statuses map[int]int
	accepted []string // requests answered 2xx: none may be
}

// startAbuser starts the abuse loop against nodes.
func startAbuser(e *env, nodes []*node) *abuser {
	a := &abuser{e: e, nodes: nodes, stopC: make(chan struct{}), doneC: make(chan struct{}), statuses: map[int]int{}}
	go a.run()
	return a
}

// stop ends the loop and waits for it.
func (a *abuser) stop() {
	close(a.stopC)
	<-a.doneC
}

func (a *abuser) run() {
	defer close(a.doneC)
	store := openStore(a.e.t, a.e.db.dsn)
	defer store.Close()
	hc := &http.Client{Timeout: 5 * time.Second}
	guess := strings.Repeat("G", 43)
	for round := 0; ; round++ {
		select {
		case <-a.stopC:
			return
		case <-time.After(100 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		leases, err := store.ListLeases(ctx)
		cancel()
		if err != nil {
			continue // the database is not the fault here; try again
		}
		n := a.nodes[round%len(a.nodes)]
		for _, l := range leases {
			if l.Holder == "" {
				continue
			}
			path := fmt.Sprintf("/v1/leases/%d/%d/", l.DatacenterID, l.WorkerID)
			// The holder names a caller might send: the row's, the part after
			// the prefix ("gen-0" for "api:gens/gen-0"), and the part after
			// the first slash (the review's "node1" of "svc/node1").
			names := []string{l.Holder, strings.TrimPrefix(l.Holder, allocator.RemoteHolderPrefix+genTokenName+"/")}
			if _, rest, ok := strings.Cut(l.Holder, "/"); ok {
				names = append(names, rest)
			}
			for _, h := range names {
				v := l.FencingVersion
				for _, body := range []string{
					fmt.Sprintf(`{"holder":%q,"fencing_version":%d,"last_timestamp_ms":0}`, h, v),
					fmt.Sprintf(`{"holder":%q,"fencing_version":%d}`, h, v),
					fmt.Sprintf(`{"holder":%q,"fencing_version":%d,"lease_secret":%q}`, h, v, guess),
					fmt.Sprintf(`{"holder":%q,"fencing_version":%d,"lease_secret":%q,"none_issued":true}`, h, v, guess),
					fmt.Sprintf(`{"holder":%q,"fencing_version":%d,"lease_secret":%q,"last_timestamp_ms":1}`, h, v, guess),
				} {
					a.send(hc, n, path+"release", body)
				}
				a.send(hc, n, path+"heartbeat", fmt.Sprintf(`{"holder":%q,"fencing_version":%d,"ttl_ms":300000}`, h, v))
				a.send(hc, n, path+"heartbeat", fmt.Sprintf(`{"holder":%q,"fencing_version":%d,"lease_secret":%q,"ttl_ms":300000}`, h, v, guess))
			}
		}
		// Acquires of the nodes' own worker IDs, under their holder names.
		for _, nd := range a.nodes {
			a.send(hc, n, "/v1/leases", fmt.Sprintf(`{"holder":%q,"workers":{"min":0,"max":1}}`, nd.holder))
		}
	}
}

// send posts one request and counts its answer.
func (a *abuser) send(hc *http.Client, n *node, path, body string) {
	req, err := http.NewRequest(http.MethodPost, n.url(path), bytes.NewReader([]byte(body)))
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+genSecret)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-ID", fmt.Sprintf("%s%d", abuseRequestPrefix, a.seq.Add(1)))
	resp, err := hc.Do(req)
	status := 0 // no answer: a node down, counted apart
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		status = resp.StatusCode
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.statuses[status]++
	if status >= 200 && status < 300 {
		a.accepted = append(a.accepted, fmt.Sprintf("POST %s %s: %d", path, body, status))
	}
}

// summary returns the answers counted, by status, and the ones accepted.
func (a *abuser) summary() (string, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var parts []string
	for s, n := range a.statuses {
		parts = append(parts, fmt.Sprintf("%d:%d", s, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ","), append([]string(nil), a.accepted...)
}

// 14. gen-abuse: two nodes on worker IDs 0-1 and four generators on the
// lease API's 2-6, under load, while a caller with the generators' own
// token spends the scenario trying to release, heartbeat and acquire what
// is not its own (abuser), one generator is paused past its ttl and
// resumed, and another is killed and restarted under its holder name at
// once. None of the caller's requests may be accepted, none may record a
// claim or a release, and the oracle must find no duplicate.
func scenarioGenAbuse(e *env) (*cluster, *load, []Draw, outcome) {
	gc := startGenNodes(e, "2-6")
	l := gc.startGenLoad()
	out := outcome{recovery: -1}
	ab := startAbuser(e, gc.nodes)
	began := time.Now()

	time.Sleep(2 * time.Second)
	paused, killed := gc.gens[0], gc.gens[1]
	paused.signal(syscall.SIGSTOP)
	stoppedAt := time.Now()
	killed.kill9()
	killed.start()
	if _, ok := killed.waitLease(stoppedAt, 30*time.Second); !ok {
		out.problem("%s got no lease after its restart", killed.name)
	}
	time.Sleep(time.Until(stoppedAt.Add(2 * leaseTTL)))
	resumed := time.Now()
	paused.signal(syscall.SIGCONT)
	if _, ok := paused.waitLease(resumed, 30*time.Second); !ok {
		out.problem("%s got no lease after SIGCONT", paused.name)
	}
	time.Sleep(2 * time.Second)
	ab.stop()
	draws, gdraws := gc.stopGenLoad(l, &out)

	statuses, accepted := ab.summary()
	for _, a := range accepted {
		out.problem("the abusing caller's request was accepted: %s", a)
	}
	events, _ := readHistory(e.t, e.db.dsn)
	abuseEvents := map[allocator.EventKind]int{}
	for _, ev := range events {
		if strings.HasPrefix(ev.RequestID, abuseRequestPrefix) {
			abuseEvents[ev.Kind]++
			if ev.Kind != allocator.EventLost {
				out.problem("the abusing caller's request %s recorded a %s of worker %d/%d by %s", ev.RequestID, ev.Kind, ev.DatacenterID, ev.WorkerID, ev.Holder)
			}
		}
	}
	out.note("abuse_requests=%d statuses=%s abuse_events=%v over=%s", ab.seq.Load(), statuses, abuseEvents, time.Since(began).Round(time.Second))
	if ab.seq.Load() < 100 {
		out.problem("the abusing caller sent only %d requests", ab.seq.Load())
	}
	gc.keepGenLogs(e, "gen-abuse")
	return gc.cluster, l, append(draws, gdraws...), out
}
