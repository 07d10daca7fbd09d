package rpcapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// countingReader counts the bytes read of r.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestCappedGzip: decompressing as connect-go does when a message is over
// its limit (read limit+1 bytes, then the rest into io.Discard), the stock
// gzip reader inflates the whole bomb, the capped one stops at the limit
// and fails; a message within the limit comes out whole, also from a
// reused reader.
func TestCappedGzip(t *testing.T) {
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	if _, err := zw.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	_ = zw.Close()
	bomb := bytes.Repeat(member.Bytes(), 32) // 32 MiB decompressed

	// connect-go's handling of a message over the limit.
	overLimit := func(d interface {
		io.Reader
		Reset(io.Reader) error
	}, src io.Reader) (int64, error) {
		if err := d.Reset(src); err != nil {
			t.Fatal(err)
		}
		got, err := io.Copy(io.Discard, io.LimitReader(d, MaxMessageBytes+1))
		if err != nil || got != MaxMessageBytes+1 {
			t.Fatalf("first read: got %d, %v; want %d bytes", got, err, MaxMessageBytes+1)
		}
		rest, err := io.Copy(io.Discard, d)
		return got + rest, err
	}

	stock := &countingReader{r: bytes.NewReader(bomb)}
	if n, err := overLimit(new(gzip.Reader), stock); err != nil || n != 32<<20 || stock.n != int64(len(bomb)) {
		t.Errorf("stock gzip.Reader: got %d bytes inflated, %v, %d compressed read; want the whole bomb, %d and %d", n, err, stock.n, 32<<20, len(bomb))
	}
	d := new(cappedGzip)
	capped := &countingReader{r: bytes.NewReader(bomb)}
	n, err := overLimit(d, capped)
	if !errors.Is(err, errInflatedTooLarge) || n != MaxMessageBytes+1 || capped.n > int64(len(bomb))/4 {
		t.Errorf("cappedGzip: got %d bytes inflated, %v, %d of %d compressed bytes read; want %d, errInflatedTooLarge, and a small part read",
			n, err, capped.n, len(bomb), MaxMessageBytes+1)
	}

	// Reused for a message within the limit.
	var small bytes.Buffer
	zw = gzip.NewWriter(&small)
	want := bytes.Repeat([]byte("idgen"), MaxMessageBytes/5)
	_, _ = zw.Write(want)
	_ = zw.Close()
	if err := d.Reset(&small); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(d)
	if err != nil || !bytes.Equal(got, want) || d.Close() != nil {
		t.Errorf("cappedGzip within the limit: got %d bytes, %v; want the %d bytes compressed", len(got), err, len(want))
	}
}

type stubIssuer struct{}

func (stubIssuer) NextSnowflakesFenced(dst []int64, n int) ([]int64, allocator.LeaseToken, error) {
	for i := range n {
		dst = append(dst, int64(i+1))
	}
	return dst, allocator.LeaseToken{}, nil
}

func (stubIssuer) Layout() snowflake.Layout { return snowflake.DefaultLayout() }

type stubSegments struct{}

func (stubSegments) Draw(context.Context, string, int, *allocator.Batch) error {
	return allocator.ErrNamespaceNotFound
}

// TestGateForgetsEveryCall: the gate forgets every request once its
// handler returned, served or refused, before and after Drain, so that
// Drain touches no finished request and the table does not grow.
func TestGateForgetsEveryCall(t *testing.T) {
	svc, err := idgen.NewService(stubIssuer{}, stubSegments{}, idgen.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Service: svc, Auth: idgen.NewAuthorizer("", nil)})
	if err != nil {
		t.Fatal(err)
	}
	send := func(path string, wantStatus int) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader([]byte("{}")))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Code != wantStatus {
			t.Errorf("POST %s: got %d %s, want %d", path, rec.Code, rec.Body, wantStatus)
		}
	}
	const nextIDs, health = "/idgen.v1.IdService/NextIds", "/grpc.health.v1.Health/Check"
	send(nextIDs, http.StatusBadRequest) // count 0
	send(health, http.StatusOK)
	s.Drain()
	send(nextIDs, http.StatusServiceUnavailable)
	send(health, http.StatusOK) // NOT_SERVING, in the body
	s.callsMu.Lock()
	n := len(s.inflight)
	s.callsMu.Unlock()
	if n != 0 {
		t.Errorf("requests known to Drain after they all returned: got %d, want 0", n)
	}
}
