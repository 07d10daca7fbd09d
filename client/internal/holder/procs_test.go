package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testkit"
)

// The processes of the multi-process tests: idgen nodes (the real binary)
// and holders (this package's binary), each writing to a file of its own.

// buildBinaries builds cmd/idgen and the holder into dir.
func buildBinaries(t *testing.T, dir string) (idgen, holder string) {
	t.Helper()
	return testkit.MustBuild(t, dir, "./cmd/idgen"), testkit.MustBuild(t, dir, "./client/internal/holder")
}

// startProc starts bin with args and extra environment, stdout and stderr
// to logPath; it is killed when the test ends if it still runs.
func startProc(t *testing.T, name, bin, logPath string, env []string, args ...string) *testkit.Proc {
	t.Helper()
	return testkit.Start(t, testkit.Spec{Name: name, Bin: bin, Args: args, Env: testkit.Env(env...), Log: logPath})
}

// node is an `idgen serve` process.
type node struct {
	*testkit.Proc
	url string
}

// startNode starts idgen serve on a port the system picks and waits until
// it is ready.
func startNode(t *testing.T, bin, dir, name string, args ...string) *node {
	t.Helper()
	addrFile := filepath.Join(dir, name+".addr")
	all := append([]string{"serve", "--listen", "127.0.0.1:0", "--addr-file", addrFile, "--holder", name,
		"--lease-ttl", "3s", "--heartbeat", "1s", "--log-level", "info", "--drain-window", "0"}, args...)
	p := startProc(t, name, bin, filepath.Join(dir, name+".log"), nil, all...)
	var url string
	testkit.WaitFor(t, 30*time.Second, name+" listening", func() bool {
		if p.Exited() {
			t.Fatalf("%s exited:\n%s", name, p.Tail(30))
		}
		b, err := os.ReadFile(addrFile)
		if err != nil || len(b) == 0 {
			return false
		}
		url = "http://" + strings.TrimSpace(string(b))
		return true
	})
	testkit.WaitFor(t, 30*time.Second, name+" ready", func() bool {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return &node{Proc: p, url: url}
}

// holderProc is a holder process and its output file.
type holderProc struct {
	*testkit.Proc
	holder string // as it names itself; the broker stores "<token name>/<holder>"
	out    string
}

func startHolder(t *testing.T, bin, dir, name, url, token string, args ...string) *holderProc {
	t.Helper()
	out := filepath.Join(dir, name+".out")
	all := append([]string{"--url", url, "--holder", name, "--out", out}, args...)
	p := startProc(t, name, bin, filepath.Join(dir, name+".log"), []string{"IDGEN_HOLDER_TOKEN=" + token}, all...)
	return &holderProc{Proc: p, holder: name, out: out}
}

// Lines of a holder's output.
type (
	leaseLine struct {
		at                                  time.Time
		dc, worker, version, floor, ceiling int64
	}
	batchLine struct {
		send, recv          time.Time
		dc, worker, version int64 // worker and version -1: not attributed
		ids                 []int64
	}
	refusalLine struct {
		at     time.Time
		reason string
	}
	holderOutput struct {
		started  bool
		leases   []leaseLine
		batches  []batchLine
		refusals []refusalLine
		closed   string // "" while not closed, "ok" or the error
	}
)

// read parses the holder's output so far; a last line cut short by a kill
// is ignored.
func (h *holderProc) read(t *testing.T) holderOutput {
	t.Helper()
	f, err := os.Open(h.out)
	if errors.Is(err, os.ErrNotExist) {
		return holderOutput{}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var o holderOutput
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			return o
		}
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(line)
		nums := func(from int) []int64 {
			out := make([]int64, 0, len(f)-from)
			for _, s := range f[from:] {
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					t.Fatalf("%s: bad line %q", h.holder, line)
				}
				out = append(out, n)
			}
			return out
		}
		switch f[0] {
		case "started":
			o.started = true
		case "lease":
			n := nums(1)
			o.leases = append(o.leases, leaseLine{time.Unix(0, n[0]), n[1], n[2], n[3], n[4], n[5]})
		case "ids":
			n := nums(1)
			o.batches = append(o.batches, batchLine{time.Unix(0, n[0]), time.Unix(0, n[1]), n[2], n[3], n[4], n[5:]})
		case "refused":
			n, _ := strconv.ParseInt(f[1], 10, 64)
			o.refusals = append(o.refusals, refusalLine{time.Unix(0, n), f[2]})
		case "closed":
			o.closed = strings.Join(f[2:], " ")
		default:
			t.Fatalf("%s: unknown line %q", h.holder, line)
		}
	}
}

// lastLease returns the lease the holder reported last.
func (o holderOutput) lastLease() (leaseLine, bool) {
	if len(o.leases) == 0 {
		return leaseLine{}, false
	}
	return o.leases[len(o.leases)-1], true
}

// idLoad draws Snowflake IDs from a node until stopped.
type idLoad struct {
	mu     sync.Mutex
	ids    []int64
	errs   []string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startIDLoad(n *node, token string) *idLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &idLoad{cancel: cancel}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		hc := &http.Client{Timeout: 5 * time.Second}
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.url+"/ids?count=100", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := hc.Do(req)
			if err == nil {
				var body struct{ IDs []string }
				derr := json.NewDecoder(resp.Body).Decode(&body)
				resp.Body.Close()
				l.mu.Lock()
				switch {
				case resp.StatusCode == 200 && derr == nil:
					for _, s := range body.IDs {
						id, _ := strconv.ParseInt(s, 10, 64)
						l.ids = append(l.ids, id)
					}
				case resp.StatusCode != 503 && len(l.errs) < 5:
					l.errs = append(l.errs, fmt.Sprintf("%s: status %d", n.Name, resp.StatusCode))
				}
				l.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return l
}

func (l *idLoad) stop() ([]int64, []string) {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ids, l.errs
}
