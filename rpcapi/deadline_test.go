package rpcapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
	"github.com/idgen-project/idgen/rpcapi"
)

// served is a server of serveWith.
type served struct {
	addr string
	// returned receives a value each time a request's handler returns,
	// closed each time the server closes a connection.
	returned, closed <-chan struct{}
}

// serveWith serves s.Mount with HTTP/1.1 and h2c on a loopback port, with
// the server's timeouts of srv (its Handler, Protocols and ConnState are
// set here), until the test ends.
func serveWith(t *testing.T, s *rpcapi.Server, srv *http.Server) served {
	t.Helper()
	ret, closed := make(chan struct{}, 1024), make(chan struct{}, 1024)
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv.Protocols = &protocols
	srv.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed <- struct{}{}
		}
	}
	h := s.Mount(http.NotFoundHandler())
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { ret <- struct{}{} }()
		h.ServeHTTP(w, r)
	})
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
	return served{addr: ln.Addr().String(), returned: ret, closed: closed}
}

// waitFor waits for n values from ch, and fails the test if they have
// not come within waitBound.
func waitFor(t *testing.T, ch <-chan struct{}, n int, what string) {
	t.Helper()
	deadline := time.After(waitBound)
	for i := range n {
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: %d of %d within %s", what, i, n, waitBound)
		}
	}
}

// freeServer returns a Server whose Snowflake IDs come without waiting.
func freeServer(t *testing.T, cfg rpcapi.Config) *rpcapi.Server {
	t.Helper()
	issuer := &gatedIssuer{gate: make(chan struct{})}
	close(issuer.gate)
	s, err := rpcapi.New(withService(t, cfg, issuer))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stallHTTP1 opens a connection and sends the headers of a Connect call of
// path with a body of 100 bytes it never sends.
func stallHTTP1(t *testing.T, addr, path, contentType string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: idgen\r\nContent-Type: %s\r\nContent-Length: 100\r\n\r\n", path, contentType); err != nil {
		t.Fatal(err)
	}
	return conn
}

// waitClosed reads conn until the server closes it, and fails the test if
// it is still open after waitBound.
func waitClosed(t *testing.T, conn net.Conn, what string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(waitBound))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s: the connection is still open after %s", what, waitBound)
		}
	}
}

// stallH2 starts a gRPC call of path over h2c whose request body never
// comes, and returns the trailer it was answered with, or the error once
// ctx ends.
func stallH2(ctx context.Context, addr, path string) (http.Header, error) {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protocols}
	defer tr.CloseIdleConnections()
	body, _ := io.Pipe() // never written
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", ctGRPC)
	req.Header.Set("TE", "trailers")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Trailer, nil
}

// TestStalledCallsTimeOut: a call whose request never arrives is ended by
// the HTTP server's read timeout, a StreamIds call like any other: the
// deadlines are lifted only once StreamIds has its request.
func TestStalledCallsTimeOut(t *testing.T) {
	s := freeServer(t, rpcapi.Config{})
	srv := serveWith(t, s, &http.Server{ReadHeaderTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: 5 * time.Second})
	for _, path := range []string{procStreamIds, procNextIds} {
		t.Run("HTTP/1.1 "+path, func(t *testing.T) {
			waitClosed(t, stallHTTP1(t, srv.addr, path, ctConnectStream), path)
		})
		t.Run("h2c "+path, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), waitBound)
			defer cancel()
			trailer, err := stallH2(ctx, srv.addr, path)
			switch {
			case ctx.Err() != nil:
				t.Fatalf("the call still runs after %s: %v", waitBound, err)
			case err == nil && (trailer.Get("Grpc-Status") == "" || trailer.Get("Grpc-Status") == "0"):
				t.Errorf("got grpc-status %q, want an error", trailer.Get("Grpc-Status"))
			}
		})
	}
}

// sentMessages returns idgen_grpc_stream_messages_sent_total of s.
func sentMessages(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "idgen_grpc_stream_messages_sent_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// blockedStream opens StreamIds (batches of one ID, no total) over
// HTTP/1.1 with the Connect protocol from a client that reads nothing, and
// returns once the server has stopped sending: its writes are blocked.
func blockedStream(t *testing.T, addr string, reg *prometheus.Registry) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	msg, _ := proto.Marshal(&idgenv1.StreamIdsRequest{BatchSize: 1})
	body := envelope(0, msg)
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: idgen\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s",
		procStreamIds, ctConnectStream, len(body), body); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitBound)
	last, still := -1.0, 0
	for still < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("the stream did not block within %s", waitBound)
		}
		time.Sleep(100 * time.Millisecond)
		n := sentMessages(t, reg)
		if n > 0 && n == last {
			still++
		} else {
			still = 0
		}
		last = n
	}
	return conn
}

// TestDrainEndsBlockedStream: Drain ends a stream whose caller stopped
// reading, blocked in a send, and Wait returns; a call whose request never
// arrived ends at Drain too, whatever the server's read timeout; the
// server closes both connections. (The blocked caller itself sees the end
// only once it reads the megabytes in its way.)
func TestDrainEndsBlockedStream(t *testing.T) {
	s := freeServer(t, rpcapi.Config{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collectors()...)
	srv := serveWith(t, s, &http.Server{ReadHeaderTimeout: time.Minute, ReadTimeout: time.Hour, WriteTimeout: time.Hour})
	blockedStream(t, srv.addr, reg)
	stalled := stallHTTP1(t, srv.addr, procStreamIds, ctConnectStream)
	time.Sleep(100 * time.Millisecond) // the stalled call reaches the server

	s.Drain()
	ctx, cancel := context.WithTimeout(t.Context(), waitBound)
	defer cancel()
	if err := s.Wait(ctx); err != nil {
		t.Fatalf("Wait after Drain with a blocked stream: %v", err)
	}
	waitFor(t, srv.closed, 2, "connections closed by the server")
	waitClosed(t, stalled, "stalled call")
}

// TestSendTimeout: a stream whose caller stops reading ends once a send
// has waited StreamSendTimeout, without a drain, and the server closes its
// connection.
func TestSendTimeout(t *testing.T) {
	s := freeServer(t, rpcapi.Config{StreamSendTimeout: 500 * time.Millisecond})
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collectors()...)
	srv := serveWith(t, s, &http.Server{ReadHeaderTimeout: time.Minute, ReadTimeout: time.Hour, WriteTimeout: time.Hour})
	blockedStream(t, srv.addr, reg)
	waitFor(t, srv.returned, 1, "handlers returned")
	waitFor(t, srv.closed, 1, "connections closed by the server")
}

// TestStreamsOutliveServerTimeouts: once StreamIds has its request, a
// stream whose caller reads runs past the server's read and write
// timeouts, over HTTP/1.1 and HTTP/2.
func TestStreamsOutliveServerTimeouts(t *testing.T) {
	s := freeServer(t, rpcapi.Config{})
	const timeout = 300 * time.Millisecond
	addr := serveWith(t, s, &http.Server{ReadHeaderTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout}).addr
	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	for name, opts := range map[string][]connect.ClientOption{
		"connect over HTTP/1.1": nil,
		"grpc over h2c":         {connect.WithGRPC()},
	} {
		t.Run(name, func(t *testing.T) {
			tr := &http.Transport{}
			if name == "grpc over h2c" {
				tr.Protocols = &h2
			}
			defer tr.CloseIdleConnections()
			client := idgenv1connect.NewIdServiceClient(&http.Client{Transport: tr}, "http://"+addr, opts...)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			st, err := client.StreamIds(ctx, connect.NewRequest(&idgenv1.StreamIdsRequest{BatchSize: 10}))
			if err != nil {
				t.Fatal(err)
			}
			end := time.Now().Add(4 * timeout)
			msgs := 0
			for time.Now().Before(end) {
				if !st.Receive() {
					t.Fatalf("the stream ended after %d messages: %v", msgs, st.Err())
				}
				msgs++
				time.Sleep(time.Millisecond)
			}
			cancel()
			_ = st.Close()
		})
	}
}
