package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idgen-project/idgen/allocator"
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

// benchHandler sends GET target to h b.N times, in process.
func benchHandler(b *testing.B, h http.Handler, target string) {
	b.Helper()
	req := httptest.NewRequest("GET", target, nil)
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

func BenchmarkIDsCount1000(b *testing.B) {
	e := newEnv(b, envOptions{})
	benchHandler(b, e.h, "/ids?count=1000")
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
