package problem_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/idgen-project/idgen/internal/problem"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
)

// refusingIDs answers every call with the error of its code.
type refusingIDs struct {
	idgenv1connect.UnimplementedIdServiceHandler
	code       problem.Code
	retryAfter time.Duration
}

func (s refusingIDs) NextIds(context.Context, *connect.Request[idgenv1.NextIdsRequest]) (*connect.Response[idgenv1.NextIdsResponse], error) {
	return nil, problem.ConnectError(s.code, "refused for the test", s.retryAfter)
}

func (s refusingIDs) StreamIds(_ context.Context, _ *connect.Request[idgenv1.StreamIdsRequest], stream *connect.ServerStream[idgenv1.StreamIdsResponse]) error {
	if err := stream.Send(&idgenv1.StreamIdsResponse{Ranges: []*idgenv1.IdRange{{First: 1, Last: 3}}, Source: idgenv1.Source_SOURCE_SNOWFLAKE}); err != nil {
		return err
	}
	return problem.ConnectError(s.code, "refused for the test", s.retryAfter)
}

// TestErrorsCrossTheWire checks that the status code, the ErrorInfo, the
// RetryInfo and the Retry-After header reach a client over each protocol
// idgen serves, unary and streaming.
func TestErrorsCrossTheWire(t *testing.T) {
	for _, tc := range []struct {
		code       problem.Code
		retryAfter time.Duration
		wantDelay  time.Duration
		wantHeader string
	}{
		{problem.Unavailable, 1500 * time.Millisecond, 1500 * time.Millisecond, "2"},
		{problem.NamespaceExhausted, 0, 0, ""},
		{problem.Invalid, 0, 0, ""},
	} {
		mux := http.NewServeMux()
		mux.Handle(idgenv1connect.NewIdServiceHandler(refusingIDs{code: tc.code, retryAfter: tc.retryAfter}))
		srv := httptest.NewUnstartedServer(mux)
		srv.EnableHTTP2 = true
		srv.StartTLS()
		wantCode := connect.CodeOf(problem.ConnectError(tc.code, "", 0))

		for name, opt := range map[string]connect.ClientOption{
			"grpc":     connect.WithGRPC(),
			"grpc-web": connect.WithGRPCWeb(),
			"connect":  connect.WithProtoJSON(),
		} {
			t.Run(string(tc.code)+"/"+name, func(t *testing.T) {
				c := idgenv1connect.NewIdServiceClient(srv.Client(), srv.URL, opt)
				_, err := c.NextIds(t.Context(), connect.NewRequest(&idgenv1.NextIdsRequest{Count: 1}))
				checkError(t, err, tc.code, wantCode, tc.wantDelay)
				var cerr *connect.Error
				if !errors.As(err, &cerr) || cerr.Meta().Get("Retry-After") != tc.wantHeader {
					t.Errorf("unary Retry-After: got %v, want %q", err, tc.wantHeader)
				}

				stream, err := c.StreamIds(t.Context(), connect.NewRequest(&idgenv1.StreamIdsRequest{BatchSize: 3}))
				if err != nil {
					t.Fatal(err)
				}
				defer stream.Close()
				if !stream.Receive() {
					t.Fatalf("stream: got no first message: %v", stream.Err())
				}
				if r := stream.Msg().GetRanges(); len(r) != 1 || r[0].GetFirst() != 1 || r[0].GetLast() != 3 {
					t.Errorf("stream: got ranges %v, want [1, 3]", r)
				}
				if stream.Receive() {
					t.Fatalf("stream: got a second message %v, want the error", stream.Msg())
				}
				checkError(t, stream.Err(), tc.code, wantCode, tc.wantDelay)
			})
		}
		srv.Close()
	}
}
