//go:build docker

package deploy_test

// docker-compose.yml, run: PostgreSQL, the migrate job, three idgen nodes
// and the nginx balancer come up and serve IDs through the balancer; one
// node is killed under load and started again. The balancer must route
// around it, no ID may be handed out twice, and the node must rejoin.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen/snowflake"
)

// The load on the cluster: a few clients on loopback, each asking for a
// batch at a time, for a bounded number of requests and a bounded time.
const (
	loadClients     = 4
	loadBatch       = 50
	loadMaxRequests = 20000 // per client
	loadMaxDuration = 2 * time.Minute
)

// sample is one request of the load.
type sample struct {
	at      time.Time     // when the response arrived
	latency time.Duration // from the request sent to its answer read
	ids     []int64
	status  int
	err     error
}

// load sends GET /ids?count=loadBatch from loadClients goroutines until
// stopped or out of budget, and keeps every answer.
type load struct {
	url   string
	stopC chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	got   []sample // guarded by mu
}

func startLoad(url string) *load {
	l := &load{url: url, stopC: make(chan struct{})}
	deadline := time.Now().Add(loadMaxDuration)
	for range loadClients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for range loadMaxRequests {
				select {
				case <-l.stopC:
					return
				default:
				}
				if time.Now().After(deadline) {
					return
				}
				var r idsResponse
				sent := time.Now()
				status, err := getJSON(l.url+"/ids?count="+strconv.Itoa(loadBatch), &r)
				s := sample{at: time.Now(), status: status, err: err}
				s.latency = s.at.Sub(sent)
				for _, id := range r.IDs {
					n, perr := strconv.ParseInt(id, 10, 64)
					if perr != nil && s.err == nil {
						s.err = perr
					}
					s.ids = append(s.ids, n)
				}
				l.mu.Lock()
				l.got = append(l.got, s)
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// stop ends the load and waits for its clients.
func (l *load) stop() {
	close(l.stopC)
	l.wg.Wait()
}

// since returns the samples that arrived at or after t.
func (l *load) since(t time.Time) []sample {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sample
	for _, s := range l.got {
		if !s.at.Before(t) {
			out = append(out, s)
		}
	}
	return out
}

// between returns the samples that arrived in [from, to).
func (l *load) between(from, to time.Time) []sample {
	var out []sample
	for _, s := range l.since(from) {
		if s.at.Before(to) {
			out = append(out, s)
		}
	}
	return out
}

// worker returns the worker ID of a Snowflake ID in the default layout,
// which the compose file's nodes use.
func worker(id int64) int64 {
	return id >> snowflake.DefaultSequenceBits & (1<<snowflake.DefaultWorkerBits - 1)
}

// workersIn returns the sorted worker IDs of the IDs in samples.
func workersIn(samples []sample) []int64 {
	seen := map[int64]bool{}
	for _, s := range samples {
		for _, id := range s.ids {
			seen[worker(id)] = true
		}
	}
	var out []int64
	for w := range seen {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// p99 returns the 99th percentile of the samples' latency, as the caller
// saw it (through the balancer, its retries included).
func p99(samples []sample) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	lat := make([]time.Duration, len(samples))
	for i, s := range samples {
		lat[i] = s.latency
	}
	slices.Sort(lat)
	return lat[min(len(lat)*99/100, len(lat)-1)]
}

// failures counts the samples that were not a full batch.
func failures(samples []sample) (n int, first string) {
	for _, s := range samples {
		if s.err != nil || s.status != 200 || len(s.ids) != loadBatch {
			if n == 0 {
				first = fmt.Sprintf("status %d, %d IDs, %v", s.status, len(s.ids), s.err)
			}
			n++
		}
	}
	return n, first
}

func TestComposeCluster(t *testing.T) {
	image := requireEnv(t, "IDGEN_TEST_IMAGE")
	compose := strings.Fields(envOr("IDGEN_TEST_COMPOSE", "docker compose"))
	project := "idgen-test-" + randomSuffix(t)
	port := freePort(t)
	env := append(os.Environ(),
		"IDGEN_IMAGE="+image,
		"IDGEN_LB_PORT="+port,
		"IDGEN_ADMIN_TOKEN="+randomSuffix(t),
	)
	composeRun := func(args ...string) (string, error) {
		return run(env, compose[0], append(append(compose[1:], "-f", "../docker-compose.yml", "-p", project), args...)...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			cmd := exec.Command(compose[0], append(compose[1:], "-f", "../docker-compose.yml", "-p", project, "logs", "--no-color", "--tail", "30")...)
			cmd.Env = env
			out, _ := cmd.CombinedOutput()
			t.Logf("compose logs:\n%s", out)
		}
		if out, err := composeRun("down", "-v", "--timeout", "5"); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		}
	})

	start := time.Now()
	if out, err := composeRun("up", "-d", "--no-build"); err != nil {
		t.Fatalf("compose up: %v\n%s", err, out)
	}
	base := "http://127.0.0.1:" + port
	eventually(t, "IDs through the balancer", 3*time.Minute, func() (bool, string) {
		var r idsResponse
		_, err := getJSON(base+"/ids?count=1", &r)
		return err == nil && len(r.IDs) == 1, fmt.Sprint(err)
	})
	t.Logf("cluster up and serving through the balancer after %v", time.Since(start).Round(100*time.Millisecond))

	// Each node's lease: the worker ID in the IDs it issues.
	container := map[string]string{}
	nodeWorker := func(node string) (int64, error) {
		out, err := run(nil, "docker", "exec", container[node], "wget", "-q", "-O", "-", "http://127.0.0.1:8080/readyz")
		if err != nil {
			return 0, err
		}
		var ready struct {
			Ready bool `json:"ready"`
			Lease *struct {
				Worker int64 `json:"worker"`
			} `json:"lease"`
		}
		if err := json.Unmarshal([]byte(out), &ready); err != nil || !ready.Ready || ready.Lease == nil {
			return 0, fmt.Errorf("not ready: %s (%w)", out, err)
		}
		return ready.Lease.Worker, nil
	}
	workers := map[string]int64{}
	for _, node := range []string{"idgen-1", "idgen-2", "idgen-3"} {
		id, err := composeRun("ps", "-q", node)
		if err != nil || id == "" {
			t.Fatalf("compose ps %s: %q %v", node, id, err)
		}
		container[node] = id
		w, err := nodeWorker(node)
		if err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		workers[node] = w
	}
	t.Logf("workers: %v", workers)

	l := startLoad(base)
	stopped := false
	defer func() {
		if !stopped {
			l.stop()
		}
	}()

	// All three nodes serve through the balancer.
	t0 := time.Now()
	time.Sleep(3 * time.Second)
	before := l.since(t0)
	if got := workersIn(before); len(got) != 3 {
		t.Errorf("before the kill: IDs from workers %v through the balancer, want the three nodes' %v", got, workers)
	}

	// Kill one node: no graceful stop, its lease stays held until it expires.
	killed := "idgen-2"
	tKill := time.Now()
	docker(t, "kill", container[killed])
	time.Sleep(10 * time.Second)
	down := l.since(tKill)
	settled := l.since(tKill.Add(2 * time.Second))
	for _, w := range workersIn(settled) {
		if w == workers[killed] {
			t.Errorf("worker %d of the killed node still issued IDs 2s after the kill", w)
		}
	}

	// Start it again: it claims a free worker ID (its old lease is still
	// unexpired) and the balancer finds it again.
	tStart := time.Now()
	if state := docker(t, "inspect", "-f", "{{.State.Running}}", container[killed]); state != "true" {
		docker(t, "start", container[killed])
	}
	var rejoined int64
	eventually(t, killed+" ready again", 2*time.Minute, func() (bool, string) {
		w, err := nodeWorker(killed)
		rejoined = w
		return err == nil, fmt.Sprint(err)
	})
	var rejoinedAfter time.Duration
	eventually(t, killed+" serving through the balancer", time.Minute, func() (bool, string) {
		for _, s := range l.since(tStart) {
			for _, id := range s.ids {
				if worker(id) == rejoined {
					rejoinedAfter = s.at.Sub(tStart)
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("no ID from worker %d yet", rejoined)
	})
	tBack := time.Now()
	time.Sleep(3 * time.Second)
	after := l.since(tBack)

	// A rolling restart: each node in turn stopped with SIGTERM (not ready
	// at once, serving through its drain window, then gone), started again
	// and ready before the next. The balancer must hide all of it.
	tRoll := time.Now()
	for _, node := range []string{"idgen-1", "idgen-2", "idgen-3"} {
		docker(t, "stop", "--time", "30", container[node])
		docker(t, "start", container[node])
		eventually(t, node+" ready after its restart", 2*time.Minute, func() (bool, string) {
			_, err := nodeWorker(node)
			return err == nil, fmt.Sprint(err)
		})
	}
	time.Sleep(2 * time.Second)
	tRolled := time.Now()
	rolling := l.between(tRoll, tRolled)
	l.stop()
	stopped = true
	failedRolling, firstRolling := failures(rolling)
	t.Logf("rolling restart of the three nodes in %v: %d requests, %d failed, latency p99 %v",
		tRolled.Sub(tRoll).Round(100*time.Millisecond), len(rolling), failedRolling, p99(rolling).Round(100*time.Microsecond))
	if failedRolling != 0 {
		t.Errorf("%d requests through the balancer failed in the rolling restart (first: %s), want none", failedRolling, firstRolling)
	}

	// No ID twice, whatever happened.
	all := l.since(time.Time{})
	seen := make(map[int64]bool)
	total, dups := 0, 0
	for _, s := range all {
		for _, id := range s.ids {
			total++
			if seen[id] {
				dups++
			}
			seen[id] = true
		}
	}
	failed, first := failures(all)
	failedDown, _ := failures(down)
	t.Logf("load: %d clients, %d requests of %d IDs, %d IDs, %d distinct, %d duplicates, %d failed requests (%d while %s was down); "+
		"latency p99 %v (%v from the kill until the node was back)",
		loadClients, len(all), loadBatch, total, len(seen), dups, failed, failedDown, killed,
		p99(all).Round(100*time.Microsecond), p99(l.between(tKill, tBack)).Round(100*time.Microsecond))
	t.Logf("before the kill: workers %v; killed %s (worker %d); while down: %d requests, workers %v; "+
		"restarted as worker %d, first ID through the balancer %v after the start; after: %d requests, workers %v",
		workersIn(before), killed, workers[killed], len(down), workersIn(settled),
		rejoined, rejoinedAfter.Round(100*time.Millisecond), len(after), workersIn(after))
	if dups != 0 {
		t.Errorf("%d duplicate IDs", dups)
	}
	if failed != 0 {
		t.Errorf("%d requests through the balancer failed (first: %s), want none: it must route around the killed node", failed, first)
	}
	if got := workersIn(after); len(got) != 3 || !slices.Contains(got, rejoined) {
		t.Errorf("after the restart: workers %v, want three including the restarted node's %d", got, rejoined)
	}
}
