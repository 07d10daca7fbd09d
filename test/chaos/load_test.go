//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// loadSpec describes one group of load clients.
type loadSpec struct {
	Nodes       []int         // node indexes; each gets Clients clients
	Clients     int           // clients per node (default 1)
	Count       int           // IDs per request (default 1000)
	Namespace   string        // "" for Snowflake draws
	Interval    time.Duration // least time between two requests of one client
	MaxRequests int           // per client; 0 means until the load stops
	Token       string        // bearer token with the ids scope, for nodes with a tokens file
}

// requestTimeout bounds one request; longer than any pause a scenario
// injects, so that requests queued at a paused node see it resume.
const requestTimeout = 20 * time.Second

// load runs load clients until stopped and records every draw.
type load struct {
	c      *cluster
	ctx    context.Context
	cancel context.CancelFunc
	quitC  chan struct{} // closed by finish: no request after the ones in flight
	wg     sync.WaitGroup
	acked  atomic.Int64

	mu       sync.Mutex
	draws    []Draw
	problems []string // malformed 200 responses and the like
	samples  map[int]string
	no503RA  int64 // 503 responses without a valid Retry-After
}

// startLoad starts the clients of every spec.
func (c *cluster) startLoad(specs ...loadSpec) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{c: c, ctx: ctx, cancel: cancel, quitC: make(chan struct{}), samples: map[int]string{}}
	for _, s := range specs {
		if s.Clients == 0 {
			s.Clients = 1
		}
		if s.Count == 0 {
			s.Count = 1000
		}
		for _, ni := range s.Nodes {
			for range s.Clients {
				l.wg.Add(1)
				go l.client(c.nodes[ni], s)
			}
		}
	}
	return l
}

// stop stops the clients, waits for them, and returns every draw.
func (l *load) stop() []Draw {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.draws
}

// finish stops the clients as stop does, but lets every request in flight
// get its answer first, so that the draws hold every ID the nodes issued
// to them (the audit's block records count those).
func (l *load) finish() []Draw {
	close(l.quitC)
	l.wg.Wait()
	return l.stop()
}

// waitAcked waits until at least n IDs were acknowledged or d passed.
func (l *load) waitAcked(n int64, d time.Duration) {
	deadline := time.Now().Add(d)
	for l.acked.Load() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *load) client(n *node, s loadSpec) {
	defer l.wg.Done()
	q := url.Values{"count": {strconv.Itoa(s.Count)}}
	if s.Namespace != "" {
		q.Set("namespace", s.Namespace)
	}
	target := n.url("/ids?" + q.Encode())
	for i := 0; s.MaxRequests == 0 || i < s.MaxRequests; i++ {
		select {
		case <-l.ctx.Done():
			return
		case <-l.quitC:
			return
		default:
		}
		began := time.Now()
		d := l.do(n, target, s)
		if d.Status == 0 && l.ctx.Err() != nil {
			return // cut short by stop: not an outcome of the system
		}
		l.record(d)
		wait := s.Interval - time.Since(began)
		if d.Status == 0 {
			wait = max(wait, 50*time.Millisecond) // the node is down: do not spin
		}
		if wait > 0 {
			select {
			case <-l.ctx.Done():
				return
			case <-l.quitC:
				return
			case <-time.After(wait):
			}
		}
	}
}

// idsResponse is the body of a 200 from GET /ids.
type idsResponse struct {
	IDs       []string `json:"ids"`
	Source    string   `json:"source"`
	Namespace string   `json:"namespace"`
}

func (l *load) do(n *node, target string, s loadSpec) Draw {
	d := Draw{Node: n.idx, Holder: n.holder, Namespace: s.Namespace, Count: s.Count}
	ctx, cancel := context.WithTimeout(l.ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		panic(err) // the URL is built by the harness
	}
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	d.Send = time.Now().Round(0)
	resp, err := n.client.Do(req)
	if err != nil {
		d.Recv = time.Now().Round(0)
		return d
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d.Recv = time.Now().Round(0)
	if err != nil {
		return d // the response was cut: no IDs were acknowledged
	}
	d.Status = resp.StatusCode
	switch d.Status {
	case http.StatusOK:
		var r idsResponse
		if err := json.Unmarshal(body, &r); err != nil {
			l.problem(fmt.Sprintf("%s: 200 with a body that is not JSON (%v): %.200q", n.holder, err, body))
			d.Status = -1
			return d
		}
		d.Source = r.Source
		d.IDs = make([]int64, 0, len(r.IDs))
		for _, s := range r.IDs {
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				l.problem(fmt.Sprintf("%s: 200 with a malformed ID %q", n.holder, s))
				continue
			}
			d.IDs = append(d.IDs, id)
		}
		if len(r.IDs) != s.Count {
			l.problem(fmt.Sprintf("%s: 200 with %d IDs for count=%d", n.holder, len(r.IDs), s.Count))
		}
		if want := map[bool]string{true: "segment", false: "snowflake"}[s.Namespace != ""]; r.Source != want && !(s.Namespace != "" && r.Source == "snowflake") {
			l.problem(fmt.Sprintf("%s: 200 with source %q, want %q", n.holder, r.Source, want))
		}
		l.acked.Add(int64(len(d.IDs)))
	case http.StatusServiceUnavailable:
		if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
			l.mu.Lock()
			l.no503RA++
			l.mu.Unlock()
		}
		fallthrough
	default:
		l.mu.Lock()
		if _, ok := l.samples[d.Status]; !ok {
			l.samples[d.Status] = fmt.Sprintf("%s: %.300s", n.holder, body)
		}
		l.mu.Unlock()
	}
	return d
}

func (l *load) record(d Draw) {
	l.mu.Lock()
	l.draws = append(l.draws, d)
	l.mu.Unlock()
}

func (l *load) problem(p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.problems) < 20 {
		l.problems = append(l.problems, p)
	}
}
