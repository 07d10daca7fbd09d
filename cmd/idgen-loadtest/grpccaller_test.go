package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
)

// grpcIDServer is a stand-in for idgen's IdService: consecutive IDs from a
// counter, and faults on demand.
type grpcIDServer struct {
	idgenv1connect.UnimplementedIdServiceHandler
	next      atomic.Int64
	calls     atomic.Int64 // NextIds calls, StreamIds opened
	messages  atomic.Int64 // StreamIds messages sent
	dupEvery  int64        // every dupEvery-th call or message repeats IDs from 1
	failEvery int64        // every failEvery-th call gets UNAVAILABLE
	short     bool         // one ID fewer than asked
	endAfter  int64        // end each stream after this many messages
	stall     bool         // streams send one message, then nothing

	mu      sync.Mutex
	conns   map[string]bool // remote addresses seen
	streams int             // streams open now
	protos  map[string]bool // "HTTP/2.0 application/grpc" and the like, as seen
}

func (s *grpcIDServer) draw(n int64) (first int64) {
	if s.short {
		n--
	}
	return s.next.Add(n) - n + 1
}

func (s *grpcIDServer) seen(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = map[string]bool{}
	}
	s.conns[addr] = true
}

func (s *grpcIDServer) NextIds(_ context.Context, req *connect.Request[idgenv1.NextIdsRequest]) (*connect.Response[idgenv1.NextIdsResponse], error) {
	s.seen(req.Peer().Addr)
	k := s.calls.Add(1)
	if s.failEvery > 0 && k%s.failEvery == 0 {
		return nil, connect.NewError(connect.CodeUnavailable, nil)
	}
	n := int64(req.Msg.GetCount())
	first := s.draw(n)
	if s.dupEvery > 0 && k%s.dupEvery == 0 {
		first = 1
	}
	if s.short {
		n--
	}
	res := &idgenv1.NextIdsResponse{Namespace: req.Msg.GetNamespace(), Source: idgenv1.Source_SOURCE_SNOWFLAKE}
	for i := range n {
		res.Ids = append(res.Ids, first+i)
	}
	return connect.NewResponse(res), nil
}

func (s *grpcIDServer) StreamIds(ctx context.Context, req *connect.Request[idgenv1.StreamIdsRequest], stream *connect.ServerStream[idgenv1.StreamIdsResponse]) error {
	s.seen(req.Peer().Addr)
	s.calls.Add(1)
	s.mu.Lock()
	s.streams++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.streams--
		s.mu.Unlock()
	}()
	n := int64(req.Msg.GetBatchSize())
	for sent := int64(0); ctx.Err() == nil; sent++ {
		if s.endAfter > 0 && sent == s.endAfter {
			return nil
		}
		if s.stall && sent == 1 {
			<-ctx.Done()
			return ctx.Err()
		}
		k := s.messages.Add(1)
		first := s.draw(n)
		if s.dupEvery > 0 && k%s.dupEvery == 0 {
			first = 1
		}
		last := first + n - 1
		if s.short {
			last--
		}
		// Two ranges per message, as a batch that crosses a millisecond.
		mid := first + (last-first)/2
		msg := &idgenv1.StreamIdsResponse{
			Source: idgenv1.Source_SOURCE_SNOWFLAKE,
			Ranges: []*idgenv1.IdRange{{First: first, Last: mid}, {First: mid + 1, Last: last}},
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (s *grpcIDServer) openStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams
}

// startGRPCServer serves s over cleartext HTTP/2 on a loopback port and
// returns its base URL.
func startGRPCServer(t *testing.T, s *grpcIDServer) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(idgenv1connect.NewIdServiceHandler(s))
	seen := func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.protos == nil {
			s.protos = map[string]bool{}
		}
		s.protos[r.Proto+" "+r.Header.Get("Content-Type")] = true
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(seen))
	ts.Config.Protocols = new(http.Protocols)
	ts.Config.Protocols.SetUnencryptedHTTP2(true)
	ts.Config.Protocols.SetHTTP1(true) // the Connect protocol over HTTP/1.1
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL
}

func TestRunGRPC(t *testing.T) {
	// What each transport must put on the wire.
	wire := map[string]map[string]bool{
		transportGRPC:    {"HTTP/2.0 application/grpc": true},
		transportGRPCGo:  {"HTTP/2.0 application/grpc": true},
		transportConnect: {"HTTP/1.1 application/proto": true, "HTTP/1.1 application/connect+proto": true},
	}
	for _, transport := range []string{transportGRPC, transportGRPCGo, transportConnect} {
		// The table inside the loop: each transport gets fresh servers.
		tests := []runCase[*grpcIDServer]{
			{name: "unary count 1", srv: &grpcIDServer{}, cfg: config{Conns: 4, Count: 1, Requests: 400}, want: runWant{ids: 400}},
			{name: "unary count 100", srv: &grpcIDServer{}, cfg: config{Conns: 2, Count: 100, Requests: 40}, want: runWant{ids: 4000}},
			{name: "unary duplicates", srv: &grpcIDServer{dupEvery: 10}, cfg: config{Conns: 2, Count: 5, Requests: 100}, want: runWant{ids: 500, dups: true}},
			{name: "unary unavailable", srv: &grpcIDServer{failEvery: 4}, cfg: config{Conns: 4, Count: 1, Requests: 200}, want: runWant{ids: 150, errs: 50, kinds: map[string]int{"grpc_unavailable": 50}}},
			{name: "unary short", srv: &grpcIDServer{short: true}, cfg: config{Conns: 1, Count: 3, Requests: 20}, want: runWant{ids: 40, errs: 20, kinds: map[string]int{"short": 20}, fail: true}},
			{name: "stream", srv: &grpcIDServer{}, cfg: config{Conns: 2, Count: 1000, Requests: 300, Stream: true}, want: runWant{ids: 300_000}},
			{name: "stream duplicates", srv: &grpcIDServer{dupEvery: 7}, cfg: config{Conns: 1, Count: 50, Requests: 70, Stream: true}, want: runWant{ids: 3500, dups: true}},
			{name: "stream short", srv: &grpcIDServer{short: true}, cfg: config{Conns: 1, Count: 10, Requests: 10, Stream: true}, want: runWant{ids: 90, errs: 10, kinds: map[string]int{"short": 10}, fail: true}},
		}
		for _, tt := range tests {
			if transport == transportGRPCGo && tt.cfg.Stream {
				continue // unary only: TestRunGRPCGoRefusesStreams
			}
			t.Run(transport+"/"+tt.name, func(t *testing.T) {
				cfg := tt.cfg
				cfg.Target = startGRPCServer(t, tt.srv)
				cfg.Transport = transport
				res := runChecked(t, cfg, tt.want)
				tt.srv.mu.Lock()
				conns := len(tt.srv.conns)
				tt.srv.mu.Unlock()
				if conns != cfg.Conns {
					t.Errorf("server saw %d connections, want %d (one HTTP/2 connection per --conns)", conns, cfg.Conns)
				}
				if cfg.Stream {
					if got := tt.srv.calls.Load(); got != int64(cfg.Conns) {
						t.Errorf("streams opened = %d, want %d (one per connection)", got, cfg.Conns)
					}
					deadline := time.Now().Add(5 * time.Second)
					for tt.srv.openStreams() > 0 && time.Now().Before(deadline) {
						time.Sleep(time.Millisecond)
					}
					if n := tt.srv.openStreams(); n != 0 {
						t.Errorf("%d streams still open after the run, want 0", n)
					}
				} else if got := tt.srv.calls.Load(); got != cfg.Requests {
					t.Errorf("server saw %d calls, want %d", got, cfg.Requests)
				}
				if res.Transport != transport || res.Stream != cfg.Stream {
					t.Errorf("transport %q stream %v, want %s and %v", res.Transport, res.Stream, transport, cfg.Stream)
				}
				tt.srv.mu.Lock()
				for p := range tt.srv.protos {
					if !wire[transport][p] {
						t.Errorf("the server saw a request as %q, which %s does not send", p, transport)
					}
				}
				tt.srv.mu.Unlock()
				if res.Latency.P50 <= 0 || res.Latency.P50 > res.Latency.P99 || res.Latency.P99 > res.Latency.Max {
					t.Errorf("latency p50 %v p99 %v max %v: want 0 < p50 ≤ p99 ≤ max", res.Latency.P50, res.Latency.P99, res.Latency.Max)
				}
			})
		}
	}
}

func TestRunGRPCGoRefusesStreams(t *testing.T) {
	cfg := config{Target: "http://127.0.0.1:1", Transport: transportGRPCGo, Conns: 1, Count: 10, Requests: 1, Stream: true}
	_, err := run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "unary calls only") {
		t.Errorf("got %v, want the refusal of a grpc-go stream", err)
	}
}

// A stream the server ends is reopened; one that goes silent for the
// timeout is canceled and reopened.
func TestRunGRPCStreamReopens(t *testing.T) {
	tests := []struct {
		name     string
		srv      *grpcIDServer
		wantKind string
	}{
		{name: "ended by the server", srv: &grpcIDServer{endAfter: 5}, wantKind: "stream_end"},
		{name: "silent", srv: &grpcIDServer{stall: true}, wantKind: "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config{Target: startGRPCServer(t, tt.srv), Transport: transportGRPC, Stream: true,
				Conns: 1, Count: 10, Requests: 12, Timeout: 50 * time.Millisecond, CheckUnique: true}
			res, err := run(context.Background(), cfg)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if res.ErrorKinds[tt.wantKind] == 0 {
				t.Errorf("error kinds %v, want some %s", res.ErrorKinds, tt.wantKind)
			}
			if got := tt.srv.calls.Load(); got < 2 {
				t.Errorf("streams opened = %d, want it reopened", got)
			}
			if res.Duplicates != 0 {
				t.Errorf("duplicates = %d, want 0", res.Duplicates)
			}
		})
	}
}

func TestRunGRPCOpenLoop(t *testing.T) {
	srv := &grpcIDServer{}
	cfg := config{Target: startGRPCServer(t, srv), Transport: transportGRPC, Conns: 2, Count: 3,
		Rate: 500, Requests: 100, CheckUnique: true}
	res, err := run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.Mode != "open" || res.Requests != 100 || res.IDs != 300 || res.Duplicates != 0 {
		t.Errorf("result mode %s, %d requests, %d ids, %d duplicates; want open, 100, 300, 0", res.Mode, res.Requests, res.IDs, res.Duplicates)
	}
	if got := srv.calls.Load(); got != 100 {
		t.Errorf("server saw %d calls, want 100", got)
	}
}

func TestMainRunGRPC(t *testing.T) {
	url := startGRPCServer(t, &grpcIDServer{})
	var stdout, stderr bytes.Buffer
	code := mainRun(context.Background(), []string{"--url", url, "--transport", "grpc", "--stream", "--count", "500", "--requests", "20", "--json", "--quiet"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit code = %d, want %d; stderr: %s", code, exitOK, stderr.String())
	}
	var res result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	if res.Requests != 20 || res.IDs != 10_000 || res.Transport != "grpc" || !res.Stream {
		t.Errorf("result = %+v, want 20 messages of 500 IDs over grpc, stream", res)
	}
	if !strings.Contains(res.Path, "/idgen.v1.IdService/StreamIds batch_size=500") {
		t.Errorf("path = %q, want it to name StreamIds and the batch size", res.Path)
	}
}

func TestMainRunGRPCUsage(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{name: "unknown transport", args: []string{"--transport", "udp"}, wantStderr: "--transport must be http, grpc, grpc-go or connect"},
		{name: "stream over http", args: []string{"--stream"}, wantStderr: "--stream needs --transport grpc or connect"},
		{name: "stream with rate", args: []string{"--transport", "grpc", "--stream", "--rate", "100"}, wantStderr: "--stream cannot take --rate"},
		{name: "path over grpc", args: []string{"--transport", "grpc", "--path", "/ids"}, wantStderr: "--path is for --transport http"},
		{name: "path over connect", args: []string{"--transport", "connect", "--path", "/ids"}, wantStderr: "--path is for --transport http"},
		{name: "count over int32", args: []string{"--transport", "grpc", "--count", "2147483648"}, wantStderr: "too large for gRPC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := mainRun(context.Background(), tt.args, &stdout, &stderr); got != exitUsage {
				t.Errorf("mainRun(%q) = %d, want %d", tt.args, got, exitUsage)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}
