package rpcapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testserver"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
)

// TestRateLimit checks that the gRPC API charges the core's per-caller
// rate limit as the HTTP routes do: a call past the caller's bucket is
// RESOURCE_EXHAUSTED with the reason TOO_MANY, a RetryInfo and a
// Retry-After of the bucket's wait; the HTTP and gRPC calls of one caller
// draw from one bucket; another caller is not affected; and the lease
// service is not limited.
func TestRateLimit(t *testing.T) {
	// One ID an hour: nothing refills whatever the test's pace.
	limit := idgen.RateLimit{Rate: 1.0 / 3600, Burst: 1}

	t.Run("by token", func(t *testing.T) {
		srv := testserver.MustStart(t, testserver.Options{Tokens: tokensFile(), RateLimit: limit, MaxCount: 1})
		conn := dial(t, srv.Addr().String())
		ctx := t.Context()
		var resp idgenv1.NextIdsResponse
		if err := conn.Invoke(withToken(ctx, secretIDs), procNextIds, &idgenv1.NextIdsRequest{Count: 1}, &resp); err != nil {
			t.Fatalf("first NextIds: %v", err)
		}
		var trailer metadata.MD
		err := conn.Invoke(withToken(ctx, secretIDs), procNextIds, &idgenv1.NextIdsRequest{Count: 1}, &resp, grpc.Trailer(&trailer))
		checkStatus(t, err, codes.ResourceExhausted, idgen.TooMany, true)
		wantRetry(t, err, trailer, time.Hour)

		_, err = streamAll(withToken(ctx, secretIDs), conn, &idgenv1.StreamIdsRequest{BatchSize: 1, Total: 1})
		checkStatus(t, err, codes.ResourceExhausted, idgen.TooMany, true)

		// The lease service is not limited: the lease caller calls it twice.
		for i := range 2 {
			if err := conn.Invoke(withToken(ctx, secretLeases), procGetLayout, &idgenv1.GetLayoutRequest{}, new(idgenv1.GetLayoutResponse)); err != nil {
				t.Fatalf("GetLayout %d: %v", i+1, err)
			}
		}
		if got := scrape(t, srv.URL, `idgen_http_rate_limited_total{caller_kind="token"}`); got != 2 {
			t.Errorf("idgen_http_rate_limited_total{caller_kind=\"token\"}: got %v, want 2", got)
		}
	})

	// A stream costs what the unary calls that would take its IDs cost:
	// each message its batch. Past the bucket it ends with the refusal a
	// unary call gets.
	t.Run("a stream pays per ID", func(t *testing.T) {
		srv := testserver.MustStart(t, testserver.Options{Tokens: tokensFile(), RateLimit: idgen.RateLimit{Rate: limit.Rate, Burst: 3000}, MaxCount: 1000})
		conn := dial(t, srv.Addr().String())
		ctx := withToken(t.Context(), secretIDs)
		msgs, trailer, err := streamWithTrailer(ctx, t, conn, &idgenv1.StreamIdsRequest{BatchSize: 1000, Total: 10000})
		if len(msgs) != 3 {
			t.Errorf("stream with a bucket of 3000 IDs: got %d messages of 1000, want 3", len(msgs))
		}
		checkStatus(t, err, codes.ResourceExhausted, idgen.TooMany, true)
		wantRetry(t, err, trailer, 1000*time.Hour)
		// The stream emptied the bucket: a unary call is refused too.
		err = conn.Invoke(ctx, procNextIds, &idgenv1.NextIdsRequest{Count: 1}, new(idgenv1.NextIdsResponse))
		checkStatus(t, err, codes.ResourceExhausted, idgen.TooMany, true)
	})

	t.Run("a namespace stream by address", func(t *testing.T) {
		srv := testserver.MustStart(t, testserver.Options{RateLimit: idgen.RateLimit{Rate: limit.Rate, Burst: 20}, MaxCount: 10})
		srv.CreateNamespace(t, allocator.NamespaceSpec{Name: "orders"})
		conn := dial(t, srv.Addr().String())
		msgs, _, err := streamWithTrailer(t.Context(), t, conn, &idgenv1.StreamIdsRequest{Namespace: "orders", BatchSize: 10, Total: 1000})
		if len(msgs) != 2 {
			t.Errorf("namespace stream with a bucket of 20 IDs: got %d messages of 10, want 2", len(msgs))
		}
		checkStatus(t, err, codes.ResourceExhausted, idgen.TooMany, true)
	})

	t.Run("by address, one bucket for HTTP and gRPC", func(t *testing.T) {
		srv := testserver.MustStart(t, testserver.Options{RateLimit: limit, MaxCount: 1})
		conn := dial(t, srv.Addr().String())
		resp, err := http.Get(srv.URL + "/ids")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /ids: got %d, want 200", resp.StatusCode)
		}
		err = conn.Invoke(t.Context(), procParse, &idgenv1.ParseRequest{Id: 1}, new(idgenv1.ParseResponse))
		checkStatus(t, err, codes.ResourceExhausted, idgen.TooMany, true)
	})
}

// wantRetry checks that a refusal asks for about the bucket's wait: in its
// RetryInfo and, in whole seconds, in its Retry-After trailer.
func wantRetry(t *testing.T, err error, trailer metadata.MD, wait time.Duration) {
	t.Helper()
	found := false
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			found = true
			if got := ri.GetRetryDelay().AsDuration(); got < wait-time.Minute || got > wait {
				t.Errorf("RetryInfo: got %v, want about %v", got, wait)
			}
		}
	}
	if !found {
		t.Errorf("no RetryInfo in %v", err)
	}
	if got, want := trailer.Get("retry-after"), strconv.Itoa(int(wait.Seconds())); len(got) != 1 || got[0] != want {
		t.Errorf("Retry-After trailer: got %q, want %s", got, want)
	}
}

// streamWithTrailer runs StreamIds until it ends and returns its messages,
// its trailer and the status it ended with.
func streamWithTrailer(ctx context.Context, t *testing.T, conn *grpc.ClientConn, req *idgenv1.StreamIdsRequest) ([]*idgenv1.StreamIdsResponse, metadata.MD, error) {
	t.Helper()
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, procStreamIds)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SendMsg(req); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	var msgs []*idgenv1.StreamIdsResponse
	for {
		m := new(idgenv1.StreamIdsResponse)
		if err := st.RecvMsg(m); err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return msgs, st.Trailer(), err
		}
		msgs = append(msgs, m)
	}
}
