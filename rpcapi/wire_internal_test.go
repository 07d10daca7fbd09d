package rpcapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/idgen-project/idgen"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
)

// refusingIDs answers every call with the error of its code.
type refusingIDs struct {
	idgenv1connect.UnimplementedIdServiceHandler
	code       idgen.Code
	retryAfter time.Duration
}

func (s refusingIDs) NextIds(context.Context, *connect.Request[idgenv1.NextIdsRequest]) (*connect.Response[idgenv1.NextIdsResponse], error) {
	return nil, connectError(&idgen.Error{Code: s.code, Detail: "refused for the test", RetryAfter: s.retryAfter})
}

func (s refusingIDs) StreamIds(_ context.Context, _ *connect.Request[idgenv1.StreamIdsRequest], stream *connect.ServerStream[idgenv1.StreamIdsResponse]) error {
	if err := stream.Send(&idgenv1.StreamIdsResponse{Ranges: []*idgenv1.IdRange{{First: 1, Last: 3}}, Source: idgenv1.Source_SOURCE_SNOWFLAKE}); err != nil {
		return err
	}
	return connectError(&idgen.Error{Code: s.code, Detail: "refused for the test", RetryAfter: s.retryAfter})
}

// TestErrorsCrossTheWire checks that the status code, the ErrorInfo, the
// RetryInfo and the Retry-After header reach a client over each protocol
// idgen serves, unary and streaming.
func TestErrorsCrossTheWire(t *testing.T) {
	for _, tc := range []struct {
		code       idgen.Code
		retryAfter time.Duration
		wantDelay  time.Duration
		wantHeader string
	}{
		{idgen.Unavailable, 1500 * time.Millisecond, 1500 * time.Millisecond, "2"},
		{idgen.NamespaceExhausted, 0, 0, ""},
		{idgen.Invalid, 0, 0, ""},
	} {
		mux := http.NewServeMux()
		mux.Handle(idgenv1connect.NewIdServiceHandler(refusingIDs{code: tc.code, retryAfter: tc.retryAfter}))
		srv := httptest.NewUnstartedServer(mux)
		srv.EnableHTTP2 = true
		srv.StartTLS()
		wantCode := connect.CodeOf(connectError(&idgen.Error{Code: tc.code, Detail: "", RetryAfter: 0}))

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

// checkError checks a call's error: its gRPC code, the code of its
// ErrorInfo (of idgen.ErrorDomain) and the delay of its RetryInfo (0: none).
func checkError(t *testing.T, err error, wantProblem idgen.Code, wantCode connect.Code, wantDelay time.Duration) {
	t.Helper()
	if got := connect.CodeOf(err); got != wantCode {
		t.Errorf("gRPC code: got %v, want %v", got, wantCode)
	}
	var cerr *connect.Error
	if !errors.As(err, &cerr) {
		t.Fatalf("got %v, want a *connect.Error", err)
	}
	var gotReason string
	var gotDelay time.Duration
	for _, d := range cerr.Details() {
		v, verr := d.Value()
		if verr != nil {
			t.Fatalf("detail %s: %v", d.Type(), verr)
		}
		switch m := v.(type) {
		case *errdetails.ErrorInfo:
			if m.GetDomain() == idgen.ErrorDomain {
				gotReason = m.GetReason()
			}
		case *errdetails.RetryInfo:
			gotDelay = m.GetRetryDelay().AsDuration()
		}
	}
	if want := reason(wantProblem); gotReason != want {
		t.Errorf("ErrorInfo reason: got %q, want %q", gotReason, want)
	}
	if gotDelay != wantDelay {
		t.Errorf("RetryInfo: got a delay of %v, want %v", gotDelay, wantDelay)
	}
}
