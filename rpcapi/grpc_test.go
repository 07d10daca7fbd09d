package rpcapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testserver"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/snowflake"
)

// The procedures, as a stock gRPC client names them.
const (
	procNextIds   = "/idgen.v1.IdService/NextIds"
	procStreamIds = "/idgen.v1.IdService/StreamIds"
	procParse     = "/idgen.v1.IdService/Parse"
	procCompose   = "/idgen.v1.IdService/Compose"
	procGetLayout = "/idgen.v1.LeaseService/GetLayout"
	procAcquire   = "/idgen.v1.LeaseService/AcquireLease"
	procHeartbeat = "/idgen.v1.LeaseService/HeartbeatLease"
	procRelease   = "/idgen.v1.LeaseService/ReleaseLease"
)

// dial returns a google.golang.org/grpc client connection to a node's
// listener: gRPC over cleartext HTTP/2, closed when the test ends.
func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// withToken returns ctx carrying "authorization: Bearer secret".
func withToken(ctx context.Context, secret string) context.Context {
	if secret == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+secret)
}

// stream opens StreamIds and returns every message until the stream
// ends, and the status it ended with.
func streamAll(ctx context.Context, conn *grpc.ClientConn, req *idgenv1.StreamIdsRequest) ([]*idgenv1.StreamIdsResponse, error) {
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, procStreamIds)
	if err != nil {
		return nil, err
	}
	if err := st.SendMsg(req); err != nil {
		return nil, err
	}
	if err := st.CloseSend(); err != nil {
		return nil, err
	}
	var out []*idgenv1.StreamIdsResponse
	for {
		m := new(idgenv1.StreamIdsResponse)
		if err := st.RecvMsg(m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, m)
	}
}

// checkRanges checks that ranges are well formed, increasing and above
// after, and returns their ID count and last ID.
func checkRanges(t *testing.T, ranges []*idgenv1.IdRange, after int64) (n, last int64) {
	t.Helper()
	last = after
	for _, r := range ranges {
		if r.GetFirst() <= last || r.GetLast() < r.GetFirst() {
			t.Fatalf("range [%d, %d] after %d: want first > %d and last >= first", r.GetFirst(), r.GetLast(), last, last)
		}
		n += r.GetLast() - r.GetFirst() + 1
		last = r.GetLast()
	}
	return n, last
}

// TestStockClient calls NextIds, StreamIds, Parse and the health service
// with google.golang.org/grpc against a whole node on loopback.
func TestStockClient(t *testing.T) {
	srv := testserver.MustStart(t, testserver.Options{})
	conn := dial(t, srv.Addr().String())
	ctx := t.Context()
	st := srv.Keeper().Status()

	var resp idgenv1.NextIdsResponse
	if err := conn.Invoke(ctx, procNextIds, &idgenv1.NextIdsRequest{Count: 5}, &resp); err != nil {
		t.Fatalf("NextIds: %v", err)
	}
	ids := resp.GetIds()
	if len(ids) != 5 || resp.GetSource() != idgenv1.Source_SOURCE_SNOWFLAKE {
		t.Fatalf("NextIds count=5: got %d IDs from %v, want 5 Snowflake IDs", len(ids), resp.GetSource())
	}
	n, last := checkRanges(t, resp.GetRanges(), -1)
	if n != 5 || resp.GetRanges()[0].GetFirst() != ids[0] || last != ids[4] {
		t.Errorf("NextIds ranges %v: want the 5 IDs %v", resp.GetRanges(), ids)
	}
	lt := resp.GetFencingToken().GetLease()
	if lt == nil || int64(lt.GetWorker()) != st.Lease.WorkerID || lt.GetFencingVersion() != st.Lease.FencingVersion || lt.GetFencingVersion() < 1 {
		t.Errorf("NextIds fencing token: got %v, want worker %d version %d", resp.GetFencingToken(), st.Lease.WorkerID, st.Lease.FencingVersion)
	}

	var parsed idgenv1.ParseResponse
	if err := conn.Invoke(ctx, procParse, &idgenv1.ParseRequest{Id: ids[0]}, &parsed); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := srv.Keeper().Layout().Decompose(snowflake.ID(ids[0]))
	if parsed.GetId() != ids[0] || parsed.GetTimestampMs() != want.Time.UnixMilli() || !parsed.GetTime().AsTime().Equal(want.Time) ||
		int64(parsed.GetWorker()) != want.Worker || int64(parsed.GetDatacenter()) != want.Datacenter || int64(parsed.GetSequence()) != want.Sequence {
		t.Errorf("Parse(%d): got %v, want %+v", ids[0], &parsed, want)
	}

	msgs, err := streamAll(ctx, conn, &idgenv1.StreamIdsRequest{BatchSize: 1000, Total: 10500})
	if err != nil {
		t.Fatalf("StreamIds: %v", err)
	}
	if len(msgs) != 11 {
		t.Fatalf("StreamIds batch 1000 total 10500: got %d messages, want 11", len(msgs))
	}
	var total int64
	prev := ids[4]
	for i, m := range msgs {
		n, l := checkRanges(t, m.GetRanges(), prev)
		wantN := int64(1000)
		if i == len(msgs)-1 {
			wantN = 500
		}
		if n != wantN || m.GetSource() != idgenv1.Source_SOURCE_SNOWFLAKE || m.GetFencingToken().GetLease().GetFencingVersion() != st.Lease.FencingVersion {
			t.Errorf("message %d: got %d IDs from %v token %v, want %d Snowflake IDs under version %d", i, n, m.GetSource(), m.GetFencingToken(), wantN, st.Lease.FencingVersion)
		}
		total += n
		prev = l
	}
	if total != 10500 {
		t.Errorf("StreamIds: got %d IDs, want 10500", total)
	}
	if n := scrape(t, srv.URL, "idgen_grpc_stream_messages_sent_total"); n != 11 {
		t.Errorf("idgen_grpc_stream_messages_sent_total: got %v, want 11", n)
	}
	// The core counts what every transport hands out; only gRPC drew here.
	if n := scrape(t, srv.URL, `idgen_ids_issued_total{source="snowflake"}`); n != 10505 {
		t.Errorf("idgen_ids_issued_total snowflake: got %v, want 10505", n)
	}

	health := healthpb.NewHealthClient(conn)
	for _, tc := range []struct {
		service string
		want    healthpb.HealthCheckResponse_ServingStatus
	}{
		{"", healthpb.HealthCheckResponse_SERVING},
		{"idgen.v1.IdService", healthpb.HealthCheckResponse_SERVING},
		{"idgen.v1.LeaseService", healthpb.HealthCheckResponse_NOT_SERVING}, // no token has the leases scope
	} {
		got, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: tc.service})
		if err != nil || got.GetStatus() != tc.want {
			t.Errorf("health %q: got %v, %v; want %v", tc.service, got.GetStatus(), err, tc.want)
		}
	}
	if _, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"}); status.Code(err) != codes.NotFound {
		t.Errorf("health of an unknown service: got %v, want NotFound", err)
	}

	// The same listener still serves the HTTP API.
	resp2, err := http.Get(srv.URL + "/healthz")
	if err != nil || resp2.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz beside gRPC: %v %v", resp2, err)
	}
	resp2.Body.Close()
}

// checkStatus checks a gRPC error's code and its ErrorInfo (reason the
// problem code in upper case, domain idgen.dev), and that it carries a
// RetryInfo exactly when retry is set.
func checkStatus(t *testing.T, err error, wantCode codes.Code, wantProblem idgen.Code, retry bool) {
	t.Helper()
	s := status.Convert(err)
	if s.Code() != wantCode {
		t.Fatalf("got %v (%v), want %v", s.Code(), err, wantCode)
	}
	var info *errdetails.ErrorInfo
	var ri *errdetails.RetryInfo
	for _, d := range s.Details() {
		switch v := d.(type) {
		case *errdetails.ErrorInfo:
			info = v
		case *errdetails.RetryInfo:
			ri = v
		}
	}
	if info == nil || info.GetReason() != strings.ToUpper(string(wantProblem)) || info.GetDomain() != idgen.ErrorDomain {
		t.Errorf("ErrorInfo: got %v, want reason %s domain %s", info, strings.ToUpper(string(wantProblem)), idgen.ErrorDomain)
	}
	if (ri != nil) != retry || (ri != nil && ri.GetRetryDelay().AsDuration() <= 0) {
		t.Errorf("RetryInfo: got %v, want one: %v", ri, retry)
	}
}

const (
	secretIDs    = "rpcapi-test-ids-secret"
	secretLeases = "rpcapi-test-leases-secret"
)

// tokensFile gives one token the ids scope and another the leases scope.
func tokensFile() string {
	return fmt.Sprintf("ids-caller ids %s\nlease-caller leases %s\n", idgen.HashSecret(secretIDs), idgen.HashSecret(secretLeases))
}

// scrape returns the value of an unlabelled-or-labelled metric line of
// /metrics, summed over its series; 0 when absent.
func scrape(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// TestBadInput: each refusal gets its mapped status code and ErrorInfo,
// and changes nothing: the namespace's counter does not move and no ID is
// handed out.
func TestBadInput(t *testing.T) {
	// The node claims worker 0; the lease API grants the others.
	srv := testserver.MustStart(t, testserver.Options{Tokens: tokensFile(), MaxCount: 100,
		Keeper: allocator.KeeperSettings{WorkerIDs: &allocator.WorkerRange{Min: 0, Max: 0}}})
	step := int64(10)
	srv.CreateNamespace(t, allocator.NamespaceSpec{Name: "orders", Step: &step})
	conn := dial(t, srv.Addr().String())
	ctx := t.Context()
	before, err := srv.Store().GetNamespace(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		secret  string
		proc    string
		req     any
		code    codes.Code
		problem idgen.Code
	}{
		{"count 0", secretIDs, procNextIds, &idgenv1.NextIdsRequest{Namespace: "orders", Count: 0}, codes.InvalidArgument, idgen.Invalid},
		{"count above the cap", secretIDs, procNextIds, &idgenv1.NextIdsRequest{Namespace: "orders", Count: 101}, codes.InvalidArgument, idgen.Invalid},
		{"snowflake count above the cap", secretIDs, procNextIds, &idgenv1.NextIdsRequest{Count: 101}, codes.InvalidArgument, idgen.Invalid},
		{"negative count", secretIDs, procNextIds, &idgenv1.NextIdsRequest{Count: -1}, codes.InvalidArgument, idgen.Invalid},
		{"malformed namespace", secretIDs, procNextIds, &idgenv1.NextIdsRequest{Namespace: "Orders!", Count: 1}, codes.InvalidArgument, idgen.Invalid},
		{"unknown namespace", secretIDs, procNextIds, &idgenv1.NextIdsRequest{Namespace: "nope", Count: 1}, codes.NotFound, idgen.NotFound},
		{"missing token", "", procNextIds, &idgenv1.NextIdsRequest{Namespace: "orders", Count: 1}, codes.Unauthenticated, idgen.Unauthorized},
		{"unknown token", "not-a-token", procNextIds, &idgenv1.NextIdsRequest{Namespace: "orders", Count: 1}, codes.Unauthenticated, idgen.Unauthorized},
		{"wrong scope", secretLeases, procNextIds, &idgenv1.NextIdsRequest{Namespace: "orders", Count: 1}, codes.PermissionDenied, idgen.Forbidden},
		{"wrong scope parse", secretLeases, procParse, &idgenv1.ParseRequest{Id: 1}, codes.PermissionDenied, idgen.Forbidden},
		{"negative id", secretIDs, procParse, &idgenv1.ParseRequest{Id: -1}, codes.InvalidArgument, idgen.Invalid},
		{"unknown format", secretIDs, procNextIds, &idgenv1.NextIdsRequest{Count: 1, Format: 9}, codes.InvalidArgument, idgen.Invalid},
		{"text of no form", secretIDs, procParse, &idgenv1.ParseRequest{Text: "!!!"}, codes.InvalidArgument, idgen.Invalid},
		{"text not in its format", secretIDs, procParse, &idgenv1.ParseRequest{Text: "zzzzzzzzzzz", Format: idgenv1.IdFormat_ID_FORMAT_HEX}, codes.InvalidArgument, idgen.Invalid},
		{"compose without a time", secretIDs, procCompose, &idgenv1.ComposeRequest{}, codes.InvalidArgument, idgen.Invalid},
		{"compose before the epoch", secretIDs, procCompose, &idgenv1.ComposeRequest{Time: timestamppb.New(snowflake.DefaultEpoch.Add(-time.Millisecond))}, codes.InvalidArgument, idgen.Invalid},
		{"compose wrong scope", secretLeases, procCompose, &idgenv1.ComposeRequest{Time: timestamppb.Now()}, codes.PermissionDenied, idgen.Forbidden},
		{"lease service wrong scope", secretIDs, procGetLayout, &idgenv1.GetLayoutRequest{}, codes.PermissionDenied, idgen.Forbidden},
		{"lease service missing token", "", procAcquire, &idgenv1.AcquireLeaseRequest{Holder: "h"}, codes.Unauthenticated, idgen.Unauthorized},
		{"acquire ttl too short", secretLeases, procAcquire, &idgenv1.AcquireLeaseRequest{Holder: "h", TtlMs: 10}, codes.InvalidArgument, idgen.Invalid},
		{"acquire pool outside the layout", secretLeases, procAcquire, &idgenv1.AcquireLeaseRequest{Holder: "h", Workers: &idgenv1.WorkerPool{Min: 0, Max: 32}}, codes.InvalidArgument, idgen.Invalid},
		{"acquire holder with a space", secretLeases, procAcquire, &idgenv1.AcquireLeaseRequest{Holder: "a b"}, codes.InvalidArgument, idgen.Invalid},
		{"acquire in the node's worker IDs", secretLeases, procAcquire, &idgenv1.AcquireLeaseRequest{Holder: "h", Workers: &idgenv1.WorkerPool{Min: 0, Max: 1}}, codes.InvalidArgument, idgen.Invalid},
		{"heartbeat of a lease never held", secretLeases, procHeartbeat, &idgenv1.HeartbeatLeaseRequest{Worker: 30, Holder: "h", FencingVersion: 1, TtlMs: 30000, LeaseSecret: strings.Repeat("s", 43)}, codes.Aborted, idgen.LeaseLost},
		{"heartbeat without a secret", secretLeases, procHeartbeat, &idgenv1.HeartbeatLeaseRequest{Worker: 30, Holder: "h", FencingVersion: 1, TtlMs: 30000}, codes.InvalidArgument, idgen.Invalid},
		{"heartbeat without a ttl", secretLeases, procHeartbeat, &idgenv1.HeartbeatLeaseRequest{Worker: 30, Holder: "h", FencingVersion: 1, LeaseSecret: strings.Repeat("s", 43)}, codes.InvalidArgument, idgen.Invalid},
		{"release with version 0", secretLeases, procRelease, &idgenv1.ReleaseLeaseRequest{Worker: 30, Holder: "h"}, codes.InvalidArgument, idgen.Invalid},
		{"release saying nothing", secretLeases, procRelease, &idgenv1.ReleaseLeaseRequest{Worker: 30, Holder: "h", FencingVersion: 1, LeaseSecret: strings.Repeat("s", 43)}, codes.InvalidArgument, idgen.Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out idgenv1.NextIdsResponse // never filled: every call fails
			err := conn.Invoke(withToken(ctx, tc.secret), tc.proc, tc.req, &out)
			checkStatus(t, err, tc.code, tc.problem, false)
		})
	}
	for _, tc := range []struct {
		name    string
		secret  string
		req     *idgenv1.StreamIdsRequest
		code    codes.Code
		problem idgen.Code
	}{
		{"stream batch 0", secretIDs, &idgenv1.StreamIdsRequest{Namespace: "orders", BatchSize: 0}, codes.InvalidArgument, idgen.Invalid},
		{"stream batch above the cap", secretIDs, &idgenv1.StreamIdsRequest{Namespace: "orders", BatchSize: 101}, codes.InvalidArgument, idgen.Invalid},
		{"stream negative total", secretIDs, &idgenv1.StreamIdsRequest{Namespace: "orders", BatchSize: 1, Total: -1}, codes.InvalidArgument, idgen.Invalid},
		{"stream unknown format", secretIDs, &idgenv1.StreamIdsRequest{Namespace: "orders", BatchSize: 1, Total: 1, Format: 9}, codes.InvalidArgument, idgen.Invalid},
		{"stream malformed namespace", secretIDs, &idgenv1.StreamIdsRequest{Namespace: "a b", BatchSize: 1}, codes.InvalidArgument, idgen.Invalid},
		{"stream unknown namespace", secretIDs, &idgenv1.StreamIdsRequest{Namespace: "nope", BatchSize: 1}, codes.NotFound, idgen.NotFound},
		{"stream missing token", "", &idgenv1.StreamIdsRequest{Namespace: "orders", BatchSize: 1}, codes.Unauthenticated, idgen.Unauthorized},
		{"stream wrong scope", secretLeases, &idgenv1.StreamIdsRequest{Namespace: "orders", BatchSize: 1}, codes.PermissionDenied, idgen.Forbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := streamAll(withToken(ctx, tc.secret), conn, tc.req)
			if len(msgs) != 0 {
				t.Errorf("got %d messages before the error, want none", len(msgs))
			}
			checkStatus(t, err, tc.code, tc.problem, false)
		})
	}

	after, err := srv.Store().GetNamespace(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if after.MaxID != before.MaxID || after.Version != before.Version {
		t.Errorf("orders after the refusals: got max_id %d version %d, want %d %d unchanged", after.MaxID, after.Version, before.MaxID, before.Version)
	}
	if st, ok := srv.Segments().NamespaceStats("orders"); ok && st.Fetches != 0 {
		t.Errorf("orders: got %d fetches, want none", st.Fetches)
	}
	if n := scrape(t, srv.URL, "idgen_grpc_ids_issued_total"); n != 0 {
		t.Errorf("idgen_grpc_ids_issued_total after the refusals: got %v, want 0", n)
	}
	// The refusals are counted by procedure and code.
	if n := scrape(t, srv.URL, `idgen_grpc_requests_total{code="invalid_argument",procedure="/idgen.v1.IdService/NextIds"}`); n != 6 {
		t.Errorf("NextIds invalid_argument count: got %v, want 6", n)
	}

	// And a good call with the right token succeeds on the same node.
	var out idgenv1.NextIdsResponse
	if err := conn.Invoke(withToken(ctx, secretIDs), procNextIds, &idgenv1.NextIdsRequest{Namespace: "orders", Count: 3}, &out); err != nil {
		t.Fatalf("NextIds with the ids token: %v", err)
	}
	if got := out.GetIds(); len(got) != 3 || got[0] != before.MaxID+1 || out.GetSource() != idgenv1.Source_SOURCE_SEGMENT {
		t.Errorf("NextIds orders count=3: got %v from %v, want 3 IDs from %d", got, out.GetSource(), before.MaxID+1)
	}
}

// TestUnavailable: a node that cannot prove a lease answers UNAVAILABLE
// with a RetryInfo.
func TestUnavailable(t *testing.T) {
	store := testserver.OpenStore(t, "sqlite")
	release := testserver.HoldWorker(t, store, 4)
	defer release()
	srv := testserver.MustStart(t, testserver.Options{Store: store, NoWait: true,
		Keeper: allocator.KeeperSettings{WorkerIDs: &allocator.WorkerRange{Min: 4, Max: 4}}})
	conn := dial(t, srv.Addr().String())
	var out idgenv1.NextIdsResponse
	err := conn.Invoke(t.Context(), procNextIds, &idgenv1.NextIdsRequest{Count: 1}, &out)
	checkStatus(t, err, codes.Unavailable, idgen.Unavailable, true)
	_, err = streamAll(t.Context(), conn, &idgenv1.StreamIdsRequest{BatchSize: 10, Total: 10})
	checkStatus(t, err, codes.Unavailable, idgen.Unavailable, true)
	h, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health without a lease: got %v, %v; want NOT_SERVING", h.GetStatus(), err)
	}
}

// TestLeaseService acquires, heartbeats and releases a lease over gRPC:
// the holder is qualified with the caller's token name, which the lease
// table records as the owner, and every later call sends the lease secret
// of the acquire answer.
func TestLeaseService(t *testing.T) {
	srv := testserver.MustStart(t, testserver.Options{Tokens: tokensFile(),
		Keeper: allocator.KeeperSettings{WorkerIDs: &allocator.WorkerRange{Min: 0, Max: 0}}})
	conn := dial(t, srv.Addr().String())
	ctx := withToken(t.Context(), secretLeases)

	var lay idgenv1.GetLayoutResponse
	if err := conn.Invoke(ctx, procGetLayout, &idgenv1.GetLayoutRequest{}, &lay); err != nil {
		t.Fatal(err)
	}
	if l := srv.Keeper().Layout(); lay.GetLayout().GetEpochMs() != l.EpochMillis() || int(lay.GetLayout().GetWorkerBits()) != l.WorkerBits {
		t.Errorf("GetLayout: got %v, want %v", lay.GetLayout(), l)
	}
	var acq idgenv1.AcquireLeaseResponse
	if err := conn.Invoke(ctx, procAcquire, &idgenv1.AcquireLeaseRequest{Holder: "proc-1", Workers: &idgenv1.WorkerPool{Min: 5, Max: 6}}, &acq); err != nil {
		t.Fatal(err)
	}
	if acq.GetHolder() != "api:lease-caller/proc-1" || acq.GetWorker() < 5 || acq.GetWorker() > 6 || acq.GetFencingVersion() < 1 ||
		acq.GetCeilingMs() < acq.GetFloorMs() || len(acq.GetLeaseSecret()) != 43 {
		t.Fatalf("AcquireLease: got %v, want holder api:lease-caller/proc-1 on worker 5 or 6 with a lease secret", &acq)
	}
	secret := acq.GetLeaseSecret()
	rows, err := srv.Store().ListLeases(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rows {
		if r.WorkerID == int64(acq.GetWorker()) {
			found = r.Holder == "api:lease-caller/proc-1" && r.Owner == "lease-caller" && r.FencingVersion == acq.GetFencingVersion()
		}
	}
	if !found {
		t.Errorf("lease table after AcquireLease: got %+v, want worker %d held by api:lease-caller/proc-1, owner lease-caller", rows, acq.GetWorker())
	}
	hbReq := &idgenv1.HeartbeatLeaseRequest{Worker: acq.GetWorker(), Holder: "proc-1", FencingVersion: acq.GetFencingVersion(),
		LeaseSecret: secret, TtlMs: acq.GetTtlMs()}
	var hb idgenv1.HeartbeatLeaseResponse
	if err := conn.Invoke(ctx, procHeartbeat, hbReq, &hb); err != nil {
		t.Fatal(err)
	}
	if hb.GetFencingVersion() != acq.GetFencingVersion() || hb.GetCeilingMs() < acq.GetCeilingMs() || hb.GetTtlMs() != acq.GetTtlMs() {
		t.Errorf("HeartbeatLease: got %v, want version %d, a ceiling of at least %d and ttl %d", &hb, acq.GetFencingVersion(), acq.GetCeilingMs(), acq.GetTtlMs())
	}
	// A release above the ceiling is refused and changes nothing; so is
	// one that says neither its last timestamp nor that none was issued.
	var rel idgenv1.ReleaseLeaseResponse
	err = conn.Invoke(ctx, procRelease, &idgenv1.ReleaseLeaseRequest{Worker: acq.GetWorker(), Holder: "proc-1", FencingVersion: acq.GetFencingVersion(),
		LeaseSecret: secret, LastTimestampMs: hb.GetCeilingMs() + 1}, &rel)
	checkStatus(t, err, codes.FailedPrecondition, idgen.InvalidRelease, false)
	err = conn.Invoke(ctx, procRelease, &idgenv1.ReleaseLeaseRequest{Worker: acq.GetWorker(), Holder: "proc-1", FencingVersion: acq.GetFencingVersion(),
		LeaseSecret: secret}, &rel)
	checkStatus(t, err, codes.InvalidArgument, idgen.Invalid, false)
	if err := conn.Invoke(ctx, procRelease, &idgenv1.ReleaseLeaseRequest{Worker: acq.GetWorker(), Holder: "proc-1", FencingVersion: acq.GetFencingVersion(),
		LeaseSecret: secret, NoneIssued: true}, &rel); err != nil {
		t.Fatal(err)
	}
	if rel.GetCeilingMs() != acq.GetFloorMs()-1 {
		t.Errorf("release with none issued: ceiling %d, want the floor - 1, %d", rel.GetCeilingMs(), acq.GetFloorMs()-1)
	}
	// Released, the lease is no longer this holder's.
	err = conn.Invoke(ctx, procHeartbeat, hbReq, &hb)
	checkStatus(t, err, codes.Aborted, idgen.LeaseLost, false)
}

// TestLeaseServiceOff: without tokens the lease service is off, as the
// HTTP lease API is.
func TestLeaseServiceOff(t *testing.T) {
	srv := testserver.MustStart(t, testserver.Options{})
	conn := dial(t, srv.Addr().String())
	var out idgenv1.GetLayoutResponse
	err := conn.Invoke(t.Context(), procGetLayout, &idgenv1.GetLayoutRequest{}, &out)
	checkStatus(t, err, codes.NotFound, idgen.NotFound, false)
}
