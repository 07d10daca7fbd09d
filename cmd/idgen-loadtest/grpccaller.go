package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
)

// The --transport values.
const (
	transportHTTP    = "http"
	transportGRPC    = "grpc"
	transportConnect = "connect"
	transportGRPCGo  = "grpc-go"
)

// rpcTransport reports whether t calls IdService (gRPC or the Connect
// protocol) rather than GET /ids.
func rpcTransport(t string) bool {
	return t == transportGRPC || t == transportConnect || t == transportGRPCGo
}

// rpcClient returns the HTTP client of a caller of IdService, with a
// connection of its own to tgt: cleartext HTTP/2 with prior knowledge
// (h2c) for gRPC, as idgen serves it, and HTTP/1.1 for the Connect
// protocol, as GET /ids uses; every call of the client shares the one
// connection.
func rpcClient(tgt target, cfg config) (*http.Client, *http.Transport) {
	dialer := &net.Dialer{Timeout: cfg.Timeout}
	tr := &http.Transport{
		MaxConnsPerHost:     1,
		MaxIdleConnsPerHost: 1,
		// Dial the address that resolveTarget checked, whatever the URL's
		// host resolves to later.
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, tgt.dial)
		},
	}
	if cfg.Transport != transportConnect {
		var protocols http.Protocols
		protocols.SetUnencryptedHTTP2(true)
		tr.Protocols = &protocols
	}
	return &http.Client{Transport: tr}, tr
}

// grpcOptions are the connect client's options: gRPC, and no gzip. The
// connect client accepts gzipped answers by default, and a server that sees
// it compresses every message, costing both sides far more CPU than the
// few bytes of a message of IDs are worth; stock gRPC clients do not ask
// for it either.
func grpcOptions(transport string) []connect.ClientOption {
	noGzip := connect.WithAcceptCompression("gzip", nil, nil)
	if transport == transportConnect {
		return []connect.ClientOption{noGzip}
	}
	return []connect.ClientOption{connect.WithGRPC(), noGzip}
}

// grpcBaseURL is the base URL of the connect client: the target's scheme,
// host and path prefix.
func grpcBaseURL(tgt target) string {
	return "http://" + tgt.host + tgt.prefix
}

// grpcPath names what a gRPC run calls, for the summary.
func grpcPath(cfg config) string {
	ns := ""
	if cfg.Namespace != "" {
		ns = " namespace=" + cfg.Namespace
	}
	if cfg.Stream {
		return fmt.Sprintf("gRPC %s batch_size=%d%s", idgenv1connect.IdServiceStreamIdsProcedure, cfg.Count, ns)
	}
	return fmt.Sprintf("gRPC %s count=%d%s", idgenv1connect.IdServiceNextIdsProcedure, cfg.Count, ns)
}

// grpcKind names the kind of a failed gRPC call, and says whether an answer
// came: an error the server sent is "grpc_" and its code (grpc_unavailable);
// one that never reached the server or never came back is timeout or
// transport.
func grpcKind(err error) (kind string, noAnswer bool) {
	if connect.IsWireError(err) {
		return "grpc_" + strings.ReplaceAll(connect.CodeOf(err).String(), " ", "_"), false
	}
	var ne net.Error
	if connect.CodeOf(err) == connect.CodeDeadlineExceeded || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) {
		return "timeout", true
	}
	return "transport", true
}

// errStreamEnd marks a stream that the server ended although it was asked
// for no total.
var errStreamEnd = errors.New("the server ended the stream")

// grpcConn is what both gRPC callers hold: an IdService client on a
// connection of its own (rpcClient), and what each call checks.
type grpcConn struct {
	client    idgenv1connect.IdServiceClient
	transport *http.Transport
	timeout   time.Duration
	want      int // IDs a call must bring: --count
	// collect: add the IDs to the caller's runSet; otherwise they are only
	// counted.
	collect bool
}

func newGRPCConn(tgt target, cfg config) grpcConn {
	hc, tr := rpcClient(tgt, cfg)
	return grpcConn{
		client:    idgenv1connect.NewIdServiceClient(hc, grpcBaseURL(tgt), grpcOptions(cfg.Transport)...),
		transport: tr,
		timeout:   cfg.Timeout,
		want:      cfg.Count,
		collect:   cfg.CheckUnique,
	}
}

// grpcUnaryCaller calls IdService.NextIds over gRPC on a connection of its
// own, one call at a time.
type grpcUnaryCaller struct {
	grpcConn
	msg *idgenv1.NextIdsRequest
}

func newGRPCUnaryCaller(tgt target, cfg config) *grpcUnaryCaller {
	return &grpcUnaryCaller{
		grpcConn: newGRPCConn(tgt, cfg),
		msg:      &idgenv1.NextIdsRequest{Namespace: cfg.Namespace, Count: int32(cfg.Count)},
	}
}

func (c *grpcUnaryCaller) call(ctx context.Context, ids *runSet) outcome {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	res, err := c.client.NextIds(ctx, connect.NewRequest(c.msg))
	if err != nil {
		kind, noAnswer := grpcKind(err)
		return outcome{kind: kind, err: err, noAnswer: noAnswer}
	}
	return unaryOutcome(res.Msg.GetIds(), c.want, c.collect, ids)
}

// unaryOutcome is the outcome of a NextIds answer of got IDs, asked for
// want, which it adds to ids when collect is set.
func unaryOutcome(got []int64, want int, collect bool, ids *runSet) outcome {
	if collect {
		for _, id := range got {
			ids.add(id)
		}
	}
	if len(got) < want {
		return outcome{n: len(got), kind: "short", err: errShort}
	}
	return outcome{n: len(got)}
}

func (c *grpcUnaryCaller) close() { c.transport.CloseIdleConnections() }

// grpcStreamCaller receives IdService.StreamIds on a connection of its own:
// one stream with no total, each call taking its next message. A stream
// that fails or ends is opened again at the next call.
type grpcStreamCaller struct {
	grpcConn
	msg *idgenv1.StreamIdsRequest

	stream *connect.ServerStreamForClient[idgenv1.StreamIdsResponse]
	cancel context.CancelFunc // ends stream
}

func newGRPCStreamCaller(tgt target, cfg config) *grpcStreamCaller {
	return &grpcStreamCaller{
		grpcConn: newGRPCConn(tgt, cfg),
		msg:      &idgenv1.StreamIdsRequest{Namespace: cfg.Namespace, BatchSize: int32(cfg.Count)},
	}
}

// call waits for the stream's next message: its latency is the time
// between two messages (the first includes opening the stream).
func (c *grpcStreamCaller) call(ctx context.Context, ids *runSet) outcome {
	if c.stream == nil {
		// The stream outlives this call: close ends it, or ctx.
		sctx, cancel := context.WithCancel(ctx)
		opened := time.AfterFunc(c.timeout, cancel)
		stream, err := c.client.StreamIds(sctx, connect.NewRequest(c.msg))
		opened.Stop()
		if err != nil {
			cancel()
			kind, noAnswer := grpcKind(err)
			return outcome{kind: kind, err: err, noAnswer: noAnswer}
		}
		c.stream, c.cancel = stream, cancel
	}
	// A server that sends nothing for the timeout loses the stream.
	timer := time.AfterFunc(c.timeout, c.cancel)
	ok := c.stream.Receive()
	timedOut := !timer.Stop()
	if !ok {
		err := c.stream.Err()
		c.end()
		if err == nil {
			return outcome{kind: "stream_end", err: errStreamEnd, noAnswer: true}
		}
		if timedOut {
			return outcome{kind: "timeout", err: err, noAnswer: true}
		}
		kind, noAnswer := grpcKind(err)
		return outcome{kind: kind, err: err, noAnswer: noAnswer}
	}
	n := 0
	for _, r := range c.stream.Msg().GetRanges() {
		first, last := r.GetFirst(), r.GetLast()
		if last < first {
			c.end()
			return outcome{n: n, kind: "bad_body", err: fmt.Errorf("range %d..%d ends before it starts", first, last)}
		}
		n += int(last - first + 1)
		if c.collect {
			ids.addRun(first, last)
		}
	}
	if n < c.want {
		return outcome{n: n, kind: "short", err: errShort}
	}
	return outcome{n: n}
}

// end cancels the current stream and forgets it.
func (c *grpcStreamCaller) end() {
	if c.stream != nil {
		c.cancel()
		_ = c.stream.Close()
		c.stream, c.cancel = nil, nil
	}
}

func (c *grpcStreamCaller) close() {
	c.end()
	c.transport.CloseIdleConnections()
}
