package rpcapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
	"github.com/idgen-project/idgen/rpcapi"
)

// splitServed is a server of serveSplit.
type splitServed struct {
	addr string
	// viaHTTP counts the calls of idgen's services the HTTP server
	// answered (connect); the others went to grpc-go.
	viaHTTP *atomic.Int64
}

// serveSplit serves s on a loopback port as a node does: the listener split
// by Listen between grpc-go and an HTTP server (HTTP/1.1 and h2c) serving
// s.Mount, until the test ends (Drain, then the HTTP server's Shutdown and
// Shutdown).
func serveSplit(t *testing.T, s *rpcapi.Server) splitServed {
	t.Helper()
	viaHTTP := new(atomic.Int64)
	h := s.Mount(http.NotFoundHandler())
	srv := &http.Server{
		ReadHeaderTimeout: time.Minute,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/idgen.v1.") {
				viaHTTP.Add(1)
			}
			h.ServeHTTP(w, r)
		}),
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv.Protocols = &protocols
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	httpLn := s.Listen(ln, time.Minute)
	wg.Go(func() { _ = srv.Serve(httpLn) })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		s.Drain()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("HTTP server's Shutdown: %v", err)
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		wg.Wait()
	})
	return splitServed{addr: ln.Addr().String(), viaHTTP: viaHTTP}
}

// TestSplit: on one port, a stock gRPC client's calls (unary, streaming,
// health, reflection) are served by grpc-go, and gRPC-Web and the Connect
// protocol, over HTTP/1.1 and h2c, by connect, as is a gRPC call on an h2c
// connection that started with the Connect protocol.
func TestSplit(t *testing.T) {
	s := freeServer(t, rpcapi.Config{})
	srv := serveSplit(t, s)
	ctx := t.Context()

	conn, err := grpc.NewClient(srv.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ids := idgenv1.NewIdServiceClient(conn)
	if resp, err := ids.NextIds(ctx, &idgenv1.NextIdsRequest{Count: 3}); err != nil || len(resp.GetIds()) != 3 {
		t.Fatalf("grpc-go NextIds count=3: got %v, %v; want 3 IDs", resp, err)
	}
	st, err := ids.StreamIds(ctx, &idgenv1.StreamIdsRequest{BatchSize: 2, Total: 6})
	if err != nil {
		t.Fatal(err)
	}
	msgs := 0
	for {
		if _, err := st.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("grpc-go StreamIds: %v", err)
		}
		msgs++
	}
	if msgs != 3 {
		t.Errorf("grpc-go StreamIds total=6 batch_size=2: got %d messages, want 3", msgs)
	}
	if _, err := ids.NextIds(ctx, &idgenv1.NextIdsRequest{Count: 0}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("grpc-go NextIds count=0: got %v, want InvalidArgument", err)
	}
	health, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: idgenv1connect.IdServiceName})
	if err != nil || health.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("grpc-go health of IdService: got %v, %v; want SERVING", health, err)
	}
	// The services reflection lists, as `grpcurl -plaintext ADDR list` asks.
	rst, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rst.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := rst.Recv()
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	var listed []string
	for _, svc := range resp.GetListServicesResponse().GetService() {
		listed = append(listed, svc.GetName())
	}
	want := rpcapi.Services()
	slices.Sort(listed)
	slices.Sort(want)
	if got, want := strings.Join(listed, " "), strings.Join(want, " "); got != want {
		t.Errorf("reflection lists %q, want %q", got, want)
	}
	_ = rst.CloseSend()
	if n := srv.viaHTTP.Load(); n != 0 {
		t.Errorf("the HTTP server answered %d of grpc-go's client's calls, want 0", n)
	}

	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	for _, tc := range []struct {
		name string
		h2c  bool
		opts []connect.ClientOption
	}{
		{"connect over HTTP/1.1", false, nil},
		{"connect over h2c", true, nil},
		{"grpc-web over HTTP/1.1", false, []connect.ClientOption{connect.WithGRPCWeb()}},
		{"grpc-web over h2c", true, []connect.ClientOption{connect.WithGRPCWeb()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &http.Transport{}
			if tc.h2c {
				tr.Protocols = &h2
			}
			defer tr.CloseIdleConnections()
			client := idgenv1connect.NewIdServiceClient(&http.Client{Transport: tr}, "http://"+srv.addr, tc.opts...)
			before := srv.viaHTTP.Load()
			for i := range 3 {
				resp, err := client.NextIds(ctx, connect.NewRequest(&idgenv1.NextIdsRequest{Count: 2}))
				if err != nil || len(resp.Msg.GetIds()) != 2 {
					t.Fatalf("call %d: got %v, %v; want 2 IDs", i, resp, err)
				}
			}
			if got := srv.viaHTTP.Load() - before; got != 3 {
				t.Errorf("the HTTP server answered %d of 3 calls, want 3", got)
			}
		})
	}
	t.Run("grpc after connect on one h2c connection", func(t *testing.T) {
		tr := &http.Transport{Protocols: &h2}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr}
		before := srv.viaHTTP.Load()
		for i, client := range []idgenv1connect.IdServiceClient{
			idgenv1connect.NewIdServiceClient(hc, "http://"+srv.addr),
			idgenv1connect.NewIdServiceClient(hc, "http://"+srv.addr, connect.WithGRPC()),
		} {
			if _, err := client.NextIds(ctx, connect.NewRequest(&idgenv1.NextIdsRequest{Count: 1})); err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		if got := srv.viaHTTP.Load() - before; got != 2 {
			t.Errorf("the HTTP server answered %d of 2 calls, want 2", got)
		}
	})
}

// TestNativeSendTimeout: a native gRPC stream whose caller stops reading
// ends once a send has waited StreamSendTimeout, and its connection is
// closed; another connection is served meanwhile.
func TestNativeSendTimeout(t *testing.T) {
	s := freeServer(t, rpcapi.Config{StreamSendTimeout: 500 * time.Millisecond})
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collectors()...)
	srv := serveSplit(t, s)
	ctx := t.Context()

	// A client whose windows are small and which never reads.
	stalled, err := grpc.NewClient(srv.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16), grpc.WithReadBufferSize(0))
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	st, err := idgenv1.NewIdServiceClient(stalled).StreamIds(ctx, &idgenv1.StreamIdsRequest{BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the server has stopped sending, then until the stream is
	// no longer open on the server.
	deadline := time.Now().Add(waitBound)
	for open := 1.0; open > 0; open = gauge(t, reg, "idgen_grpc_streams_open") {
		if time.Now().After(deadline) {
			t.Fatalf("the stream is still open after %s (%v messages sent)", waitBound, sentMessages(t, reg))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The caller sees its stream end once it reads what was sent.
	for {
		if _, err := st.Recv(); err != nil {
			if status.Code(err) == codes.OK {
				t.Errorf("the stream ended with %v, want an error", err)
			}
			break
		}
	}
	fresh, err := grpc.NewClient(srv.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, err := idgenv1.NewIdServiceClient(fresh).NextIds(ctx, &idgenv1.NextIdsRequest{Count: 1}); err != nil {
		t.Errorf("NextIds on another connection: %v", err)
	}
}

// gauge returns the value of the gauge name of reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestSplitHTTP1Bytes: a connection that sends an HTTP/1.1 request whose
// first bytes match the HTTP/2 preface ("P…") reaches the HTTP server whole.
func TestSplitHTTP1Bytes(t *testing.T) {
	s := freeServer(t, rpcapi.Config{})
	srv := serveSplit(t, s)
	conn, err := net.Dial("tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "PRI /healthz HTTP/1.1\r\nHost: idgen\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(waitBound))
	got, _ := io.ReadAll(conn)
	if !strings.HasPrefix(string(got), "HTTP/1.1 ") {
		t.Errorf("got %q, want an HTTP/1.1 answer", got)
	}
}
