package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/httpapi"
)

// discardWriter is a reusable http.ResponseWriter that keeps only the
// status, so a benchmark measures the handler and not a recorder.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(p)
	return len(p), nil
}

func (w *discardWriter) reset() {
	clear(w.h)
	w.status, w.n = 0, 0
}

// benchHandler sends GET target, with the headers given as pairs of name
// and value, to h b.N times, in process.
func benchHandler(b *testing.B, h http.Handler, target string, header ...string) {
	b.Helper()
	req := httptest.NewRequest("GET", target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	w := &discardWriter{h: http.Header{}}
	h.ServeHTTP(w, req) // warm the pools
	if w.status != http.StatusOK {
		b.Fatalf("GET %s: status %d", target, w.status)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w.reset()
		h.ServeHTTP(w, req)
		if w.status != http.StatusOK {
			b.Fatalf("GET %s: status %d", target, w.status)
		}
	}
	b.SetBytes(int64(w.n))
}

func BenchmarkIDsCount1(b *testing.B) {
	e := newEnv(b, envOptions{})
	benchHandler(b, e.h, "/ids")
}

// BenchmarkIDsCount1RequestID is BenchmarkIDsCount1 with the caller's
// X-Request-ID, which the answer echoes without a new one being made.
func BenchmarkIDsCount1RequestID(b *testing.B) {
	e := newEnv(b, envOptions{})
	benchHandler(b, e.h, "/ids", "X-Request-ID", "0af7651916cd43dd8448eb211c80319c")
}

// BenchmarkIDsCount1Tokens is BenchmarkIDsCount1 on a node with tokens:
// each request's secret is hashed and compared with every token's (four
// here, plus the admin token).
func BenchmarkIDsCount1Tokens(b *testing.B) {
	e := newEnv(b, envOptions{tokens: testTokens, token: testToken})
	benchHandler(b, e.h, "/ids", "Authorization", "Bearer "+secretAll)
}

func BenchmarkIDsCount1000(b *testing.B) {
	e := newEnv(b, envOptions{})
	benchHandler(b, e.h, "/ids?count=1000")
}

// benchAudit is the audit trail of BenchmarkAuditIDs: JSON lines to a
// file, a block record per holder every blocks.
func benchAudit(b *testing.B, blocks time.Duration) app.AuditConfig {
	return app.AuditConfig{Sink: "file:" + filepath.Join(b.TempDir(), "audit.jsonl"),
		Settings: audit.RecorderSettings{BlockInterval: blocks}}
}

func BenchmarkIDsNamespace(b *testing.B) {
	e := newEnv(b, envOptions{})
	e.createNamespace(allocator.Namespace{Name: "bench", Step: 100000, MaxStep: 1 << 30})
	benchHandler(b, e.h, "/ids?namespace=bench")
}

// BenchmarkBareEcho is the baseline: echo v4 answering a constant JSON body.
func BenchmarkBareEcho(b *testing.B) {
	e := echo.New()
	body := []byte(`{"ids":["123456789012345678"],"source":"snowflake"}` + "\n")
	e.GET("/ids", func(c echo.Context) error {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, body)
	})
	benchHandler(b, e, "/ids")
}

// BenchmarkHTTPLoopback compares GET /ids?count=1 with the bare echo
// handler over real keep-alive TCP connections on the loopback interface:
// each server is the http.Server idgen runs (Server.HTTPServer's limits),
// and conns goroutines each send one request at a time with a minimal
// client. One op is one request; CPU-µs/req is the CPU time of the whole
// process (server and client) per request. The ratio of the two ns/op is
// the ratio of requests per second the handlers reach with the same load,
// without the load tool's own variance.
func BenchmarkHTTPLoopback(b *testing.B) {
	const conns = 8
	e := newEnv(b, envOptions{})
	handlers := []struct {
		name   string
		server func() *http.Server // a fresh one per run: Shutdown is final
	}{
		{"idgen", func() *http.Server { return e.srv.HTTPServer("") }},
		{"bare-echo", bareServer},
	}
	for _, h := range handlers {
		b.Run(fmt.Sprintf("handler=%s/conns=%d", h.name, conns), func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv := h.server()
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(ctx)
				<-done
			}()
			clients := make([]*loopbackClient, conns)
			for i := range clients {
				if clients[i], err = dialLoopback(ln.Addr().String(), "/ids?count=1"); err != nil {
					b.Fatal(err)
				}
				defer clients[i].close()
				if err := clients[i].get(); err != nil { // warm the connection
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			cpu0, start := processCPU(b), time.Now()
			for _, c := range clients {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if err := c.get(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed, cpu := time.Since(start), processCPU(b)-cpu0
			b.StopTimer()
			b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(b.N), "CPU-µs/req")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
		})
	}
}

// bareServer is the baseline of BenchmarkHTTPLoopback: echo v4 with one
// route answering a constant JSON body shaped like idgen's, no middleware,
// and idgen's server limits (as idgen-loadtest bare-echo runs it).
func bareServer() *http.Server {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	body := []byte(`{"ids":["271828182845904523"],"source":"snowflake","lease":{"datacenter":0,"worker":0,"fencing_version":1}}`)
	e.GET("/ids", func(c echo.Context) error {
		return c.JSONBlob(http.StatusOK, body)
	})
	return &http.Server{
		Handler:           e,
		MaxHeaderBytes:    httpapi.MaxHeaderBytes,
		ReadHeaderTimeout: httpapi.ReadHeaderTimeout,
		ReadTimeout:       httpapi.ReadTimeout,
		WriteTimeout:      httpapi.WriteTimeout,
		IdleTimeout:       httpapi.IdleTimeout,
	}
}

// processCPU returns the CPU time (user + system) of the whole process.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loopbackClient sends one GET again and again on a keep-alive connection
// and reads each answer by its Content-Length.
type loopbackClient struct {
	nc  net.Conn
	br  *bufio.Reader
	req []byte
	buf []byte
}

func dialLoopback(addr, target string) (*loopbackClient, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	req := fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, addr)
	return &loopbackClient{nc: nc, br: bufio.NewReader(nc), req: req}, nil
}

func (c *loopbackClient) get() error {
	if _, err := c.nc.Write(c.req); err != nil {
		return err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("status line %q", line)
	}
	length := -1
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
			if length, err = strconv.Atoi(string(v)); err != nil {
				return err
			}
		}
	}
	if length < 0 {
		return errors.New("no Content-Length")
	}
	if cap(c.buf) < length {
		c.buf = make([]byte, length)
	}
	_, err = io.ReadFull(c.br, c.buf[:length])
	return err
}

func (c *loopbackClient) close() { _ = c.nc.Close() }
