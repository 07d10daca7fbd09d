package rpcapi_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/internal/testserver"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/rpcapi"
	"github.com/idgen-project/idgen/snowflake"
)

// waitBound bounds the waits of these tests; none passes or fails on how
// long anything took.
const waitBound = 30 * time.Second

// gatedIssuer makes n consecutive IDs per call, one call per token sent
// on gate (or freely once gate is closed), and counts its calls.
type gatedIssuer struct {
	gate  chan struct{}
	calls atomic.Int64
	next  atomic.Int64
}

func (g *gatedIssuer) NextSnowflakesFenced(dst []int64, n int) ([]int64, allocator.LeaseToken, error) {
	<-g.gate
	g.calls.Add(1)
	first := g.next.Add(int64(n)) - int64(n) + 1
	for i := range int64(n) {
		dst = append(dst, first+i)
	}
	return dst, allocator.LeaseToken{DatacenterID: 0, WorkerID: 1, FencingVersion: 1}, nil
}

func (g *gatedIssuer) Layout() snowflake.Layout { return snowflake.DefaultLayout() }

// noSegments refuses every namespace.
type noSegments struct{}

func (noSegments) Draw(context.Context, string, int, *allocator.Batch) error {
	return allocator.ErrNamespaceNotFound
}

// withService returns cfg with a service drawing from snowflakes and
// noSegments, on a node without tokens.
func withService(t *testing.T, cfg rpcapi.Config, snowflakes idgen.Snowflakes) rpcapi.Config {
	t.Helper()
	svc, err := idgen.NewService(snowflakes, noSegments{}, idgen.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Service, cfg.Auth = svc, idgen.NewAuthorizer("", nil)
	return cfg
}

// serveRPC serves s's handler with h2c on a loopback port; done tells when
// the server saw a call's context end (its caller cancelled, or it
// returned), returned when its handler returned. Stopped when the test
// ends.
func serveRPC(t *testing.T, s *rpcapi.Server) (addr string, done, returned <-chan struct{}) {
	t.Helper()
	ret := make(chan struct{}, 16)
	ctxDone := make(chan struct{}, 16)
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	h := s.Mount(http.NotFoundHandler())
	srv := &http.Server{
		Protocols:         &protocols,
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() { ret <- struct{}{} }()
			go func() {
				<-r.Context().Done()
				ctxDone <- struct{}{}
			}()
			h.ServeHTTP(w, r)
		}),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	t.Cleanup(func() {
		_ = srv.Close()
		wg.Wait()
	})
	return ln.Addr().String(), ctxDone, ret
}

// TestCancelStopsGeneration: once the caller cancels a stream, the server
// makes no further batch: at most the one under way when the cancel came.
func TestCancelStopsGeneration(t *testing.T) {
	issuer := &gatedIssuer{gate: make(chan struct{})}
	s, err := rpcapi.New(withService(t, rpcapi.Config{}, issuer))
	if err != nil {
		t.Fatal(err)
	}
	addr, done, returned := serveRPC(t, s)
	conn := dial(t, addr)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, procStreamIds)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SendMsg(&idgenv1.StreamIdsRequest{BatchSize: 100}); err != nil { // total 0: until cancelled
		t.Fatal(err)
	}
	_ = st.CloseSend()
	const received = 3
	for i := range received {
		issuer.gate <- struct{}{}
		var m idgenv1.StreamIdsResponse
		if err := st.RecvMsg(&m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if n, _ := checkRanges(t, m.GetRanges(), int64(i)*100); n != 100 {
			t.Fatalf("message %d: got %d IDs, want 100", i, n)
		}
	}
	// The server is now making (or blocked in) the fourth batch. Once it
	// has seen the cancel, the issuer makes batches freely: a server that
	// went on would make many more.
	cancel()
	select {
	case <-done:
	case <-time.After(waitBound):
		t.Fatalf("the server did not see the cancel within %s", waitBound)
	}
	close(issuer.gate)
	select {
	case <-returned:
	case <-time.After(waitBound):
		t.Fatalf("the stream's handler still runs %s after the cancel", waitBound)
	}
	if got := issuer.calls.Load(); got > received+1 {
		t.Errorf("batches made: got %d, want at most %d (%d sent, one under way at the cancel)", got, received+1, received)
	}
}

// TestDrainOnClose: Close ends an open stream promptly with UNAVAILABLE
// (and its ErrorInfo and RetryInfo) instead of waiting for its caller, the
// IDs received before remain valid, and no goroutine of the node outlives
// Close.
func TestDrainOnClose(t *testing.T) {
	dsn := testserver.StoreDSN(t, "sqlite")
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	a, err := app.Open(context.Background(), app.Config{
		DSN: dsn, Migrate: true, Listen: "127.0.0.1:0",
		// A shutdown that waited for the stream would fail after this
		// long; the drain must make it unnecessary.
		ShutdownTimeout: waitBound,
	})
	if err != nil {
		t.Fatal(err)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- a.Serve() }()
	deadline := time.Now().Add(waitBound)
	for a.Keeper().Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("no lease within %s", waitBound)
		}
		time.Sleep(5 * time.Millisecond)
	}

	conn, err := grpc.NewClient(a.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	st, err := conn.NewStream(t.Context(), &grpc.StreamDesc{ServerStreams: true}, procStreamIds)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SendMsg(&idgenv1.StreamIdsRequest{BatchSize: 1000}); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	var first idgenv1.StreamIdsResponse
	if err := st.RecvMsg(&first); err != nil {
		t.Fatalf("first message: %v", err)
	}

	closed := make(chan error, 1)
	go func() { closed <- a.Close(context.Background()) }()
	var last error
	for {
		var m idgenv1.StreamIdsResponse
		if last = st.RecvMsg(&m); last != nil {
			break
		}
	}
	checkStatus(t, last, codes.Unavailable, idgen.Unavailable, true)
	if err := <-closed; err != nil {
		t.Errorf("Close with a stream open: got %v, want nil", err)
	}
	if err := <-serveErr; err != nil {
		t.Errorf("Serve: got %v, want nil", err)
	}
	_ = conn.Close()

	// A new call after Close finds nothing listening.
	if _, err := net.DialTimeout("tcp", a.Addr().String(), time.Second); err == nil {
		t.Errorf("the listener still accepts after Close")
	}
	if errors.Is(last, context.Canceled) {
		t.Errorf("the stream ended as cancelled, want a status from the server")
	}
}
