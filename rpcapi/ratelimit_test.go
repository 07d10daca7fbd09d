package rpcapi_test

import (
	"net/http"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idgen-project/idgen/httpapi"
	"github.com/idgen-project/idgen/internal/problem"
	"github.com/idgen-project/idgen/internal/testserver"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
)

// TestRateLimit checks that the gRPC API shares the HTTP routes' per-caller
// rate limit: a call past the caller's bucket is RESOURCE_EXHAUSTED with
// the reason TOO_MANY, a RetryInfo and a Retry-After of the bucket's wait;
// the HTTP and gRPC calls of one caller draw from one bucket; another
// caller is not affected; and the lease service is not limited.
func TestRateLimit(t *testing.T) {
	// One call an hour: the second is refused whatever the test's pace.
	limit := httpapi.RateLimit{Rate: 1.0 / 3600, Burst: 1}

	t.Run("by token", func(t *testing.T) {
		srv := testserver.MustStart(t, testserver.Options{Tokens: tokensFile(), RateLimit: limit})
		conn := dial(t, srv.Addr().String())
		ctx := t.Context()
		var resp idgenv1.NextIdsResponse
		if err := conn.Invoke(withToken(ctx, secretIDs), procNextIds, &idgenv1.NextIdsRequest{Count: 1}, &resp); err != nil {
			t.Fatalf("first NextIds: %v", err)
		}
		var trailer metadata.MD
		err := conn.Invoke(withToken(ctx, secretIDs), procNextIds, &idgenv1.NextIdsRequest{Count: 1}, &resp, grpc.Trailer(&trailer))
		checkStatus(t, err, codes.ResourceExhausted, problem.TooMany, true)
		wantRetry(t, err, trailer)

		_, err = streamAll(withToken(ctx, secretIDs), conn, &idgenv1.StreamIdsRequest{BatchSize: 1, Total: 1})
		checkStatus(t, err, codes.ResourceExhausted, problem.TooMany, true)

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

	t.Run("by address, one bucket for HTTP and gRPC", func(t *testing.T) {
		srv := testserver.MustStart(t, testserver.Options{RateLimit: limit})
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
		checkStatus(t, err, codes.ResourceExhausted, problem.TooMany, true)
	})
}

// wantRetry checks that a refusal asks for about the bucket's wait, an
// hour: in its RetryInfo and in its Retry-After trailer.
func wantRetry(t *testing.T, err error, trailer metadata.MD) {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			if got := ri.GetRetryDelay().AsDuration(); got < 59*time.Minute || got > time.Hour {
				t.Errorf("RetryInfo: got %v, want about an hour", got)
			}
		}
	}
	if got := trailer.Get("retry-after"); len(got) != 1 || got[0] != "3600" {
		t.Errorf("Retry-After trailer: got %q, want 3600", got)
	}
}
