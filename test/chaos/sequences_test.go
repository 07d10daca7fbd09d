//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator/sequence"
)

// sequenceTTL is the reservation ttl of the scenario's sequence.
const sequenceTTL = 3 * time.Second

// TestChaosSequences: clients reserve, confirm and void numbers of one
// sequence on three nodes while a node is killed (-9) and restarted, a node
// is paused past its lease, and (on the servers) the database is restarted.
// Afterwards, once the ttl has passed, the ledger holds per period exactly
// start..N, each once, each in a final state; every number a client
// received is in the ledger under the reservation it received it in; no
// number and no formatted number twice.
//
//	go test -tags chaos -count=1 -v -run 'TestChaosSequences/sqlite' ./test/chaos/
func TestChaosSequences(t *testing.T) {
	bin := buildIdgen(t, t.TempDir())
	for _, db := range []string{"postgres", "mysql", "sqlite"} {
		t.Run(db, func(t *testing.T) { runSequencesChaos(t, bin, db) })
	}
}

// received is one reservation a client got.
type received struct {
	id        string
	numbers   []int64
	formatted []string
	settled   string // confirmed or voided when that call succeeded
}

func runSequencesChaos(t *testing.T, bin, db string) {
	d := freshDatabase(t, db)
	migrate(t, bin, d.dsn)
	if out, err := runIdgen(t, bin, "sequences", "create", "chaos", "--format", "C{yyyy}-{seq:08}", "--reset", "yearly",
		"--ttl", sequenceTTL.String(), "--dsn", d.dsn); err != nil {
		t.Fatalf("idgen sequences create: %v\n%s", err, out)
	}
	c := newCluster(t, bin, "0-3", []string{d.dsn}, 3)
	c.startAll()
	c.waitReady(0, 1, 2)

	var (
		mu       sync.Mutex
		got      []received
		failures = map[string]int{}
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	for w := range 12 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for range 100000 {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				n := c.nodes[rng.IntN(len(c.nodes))]
				r, outcome := reserveOn(n, 1+rng.IntN(3))
				if outcome != "" {
					mu.Lock()
					failures["reserve "+outcome]++
					mu.Unlock()
					continue
				}
				switch p := rng.IntN(100); {
				case p < 45:
					r.settled = settleOn(c.nodes[rng.IntN(len(c.nodes))], r.id, "confirm", failures, &mu)
				case p < 80:
					r.settled = settleOn(c.nodes[rng.IntN(len(c.nodes))], r.id, "void", failures, &mu)
				}
				mu.Lock()
				got = append(got, r)
				mu.Unlock()
			}
		})
	}

	notes := []string{}
	time.Sleep(3 * time.Second)
	c.nodes[0].kill9()
	c.nodes[0].start()
	notes = append(notes, "node-0 killed -9 and restarted")
	time.Sleep(3 * time.Second)
	c.nodes[1].signal(syscall.SIGSTOP)
	time.Sleep(2 * leaseTTL)
	c.nodes[1].signal(syscall.SIGCONT)
	notes = append(notes, fmt.Sprintf("node-1 paused %s", 2*leaseTTL))
	time.Sleep(3 * time.Second)
	if db != "sqlite" {
		localServer(t, db)
		t.Cleanup(func() { ensureServer(t, db) })
		if err := bounceServer(t, db, 0); err != nil {
			t.Errorf("restart %s: %v", db, err)
		}
		if _, err := waitServer(db, 2*time.Minute); err != nil {
			t.Error(err)
		}
		notes = append(notes, db+" restarted")
		time.Sleep(3 * time.Second)
	}
	close(stop)
	wg.Wait()
	time.Sleep(sequenceTTL + time.Second) // every open reservation expires

	store := openStore(t, d.dsn)
	seqs := store.(interface{ Sequences() sequence.Store }).Sequences()
	var entries []sequence.Entry
	q := sequence.LedgerQuery{Sequence: "chaos", Limit: sequence.MaxLedgerLimit}
	for range 10000 {
		page, err := seqs.Ledger(t.Context(), q)
		if err != nil {
			t.Fatalf("read the ledger: %v", err)
		}
		entries = append(entries, page...)
		if len(page) < q.Limit {
			break
		}
		q.AfterPeriod, q.AfterNumber = page[len(page)-1].Period, page[len(page)-1].Number
	}

	var problems []string
	byNumber := map[string]sequence.Entry{}
	last := map[string]int64{}
	formatted := map[string]bool{}
	states := map[sequence.State]int{}
	for _, e := range entries {
		if e.Number != last[e.Period]+1 {
			problems = append(problems, fmt.Sprintf("period %s: number %d follows %d", e.Period, e.Number, last[e.Period]))
		}
		last[e.Period] = e.Number
		if formatted[e.Formatted] {
			problems = append(problems, fmt.Sprintf("formatted number %s twice", e.Formatted))
		}
		formatted[e.Formatted] = true
		if e.State == sequence.Reserved {
			problems = append(problems, fmt.Sprintf("number %d still reserved after its ttl", e.Number))
		}
		states[e.State]++
		byNumber[e.Formatted] = e
	}
	seen := map[string]string{}
	for _, r := range got {
		for i, f := range r.formatted {
			if prev, dup := seen[f]; dup {
				problems = append(problems, fmt.Sprintf("%s received in %s and %s", f, prev, r.id))
			}
			seen[f] = r.id
			e, ok := byNumber[f]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s received in %s is not in the ledger", f, r.id))
			case e.ReservationID != r.id || e.Number != r.numbers[i]:
				problems = append(problems, fmt.Sprintf("%s received in %s as %d: the ledger has it in %s as %d", f, r.id, r.numbers[i], e.ReservationID, e.Number))
			case r.settled != "" && string(e.State) != r.settled:
				problems = append(problems, fmt.Sprintf("%s was %s, the ledger says %s", f, r.settled, e.State))
			}
		}
	}
	if len(got) == 0 {
		problems = append(problems, "no reservation succeeded")
	}
	problems = append(problems, c.stopAll()...)
	t.Logf("chaos: scenario=sequences db=%s reservations=%d numbers_received=%d ledger_rows=%d confirmed=%d voided=%d expired=%d failures=%v periods=%v faults=%q problems=%d",
		db, len(got), len(seen), len(entries), states[sequence.Confirmed], states[sequence.Voided], states[sequence.Expired],
		failures, last, notes, len(problems))
	for i, p := range problems {
		if i == 20 {
			t.Errorf("… and %d more", len(problems)-20)
			break
		}
		t.Error(p)
	}
}

// reserveOn reserves n numbers on node nd; outcome is "" on success, else
// what happened (a status or "transport").
func reserveOn(nd *node, n int) (received, string) {
	status, body, err := post(nd, "/v1/sequences/chaos/reservations", `{"count":`+strconv.Itoa(n)+`}`)
	if err != nil {
		return received{}, "transport"
	}
	if status != http.StatusCreated {
		return received{}, strconv.Itoa(status)
	}
	var r struct {
		ReservationID string   `json:"reservation_id"`
		Numbers       []string `json:"numbers"`
		Formatted     []string `json:"formatted"`
	}
	if err := json.Unmarshal(body, &r); err != nil || len(r.Numbers) != n || len(r.Formatted) != n {
		return received{}, "malformed"
	}
	out := received{id: r.ReservationID, formatted: r.Formatted}
	for _, s := range r.Numbers {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return received{}, "malformed"
		}
		out.numbers = append(out.numbers, v)
	}
	return out, ""
}

// settleOn confirms or voids reservation id on node nd and returns the
// state it set, "" when the call failed (counted in failures).
func settleOn(nd *node, id, op string, failures map[string]int, mu *sync.Mutex) string {
	status, _, err := post(nd, "/v1/sequences/chaos/reservations/"+id+"/"+op, "")
	if err == nil && status == http.StatusOK {
		if op == "confirm" {
			return string(sequence.Confirmed)
		}
		return string(sequence.Voided)
	}
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		failures[op+" transport"]++
	} else {
		failures[op+" "+strconv.Itoa(status)]++
	}
	return ""
}

// post does one POST with a short timeout and returns status and body.
func post(nd *node, path, body string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, nd.url(path), bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := nd.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}
