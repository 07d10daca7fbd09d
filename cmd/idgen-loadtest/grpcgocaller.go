package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
)

// grpcGoUnaryCaller calls IdService.NextIds with grpc-go's own client on a
// connection of its own, one call at a time: the client most Go callers of
// gRPC use, beside the connect client of --transport grpc, since what a
// call costs the server depends on the client's framing and headers too.
type grpcGoUnaryCaller struct {
	conn    *grpc.ClientConn
	client  idgenv1.IdServiceClient
	msg     *idgenv1.NextIdsRequest
	timeout time.Duration
	want    int
	collect bool
	err     error // from grpc.NewClient: every call returns it
}

func newGRPCGoUnaryCaller(tgt target, cfg config) *grpcGoUnaryCaller {
	c := &grpcGoUnaryCaller{
		msg:     &idgenv1.NextIdsRequest{Namespace: cfg.Namespace, Count: int32(cfg.Count)},
		timeout: cfg.Timeout,
		want:    cfg.Count,
		collect: cfg.CheckUnique,
	}
	dialer := &net.Dialer{Timeout: cfg.Timeout}
	// The target is only a name: the dialer always dials the address that
	// resolveTarget checked.
	c.conn, c.err = grpc.NewClient("passthrough:///"+tgt.host,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", tgt.dial)
		}))
	if c.err == nil {
		c.client = idgenv1.NewIdServiceClient(c.conn)
	}
	return c
}

func (c *grpcGoUnaryCaller) call(ctx context.Context, ids *runSet) outcome {
	if c.err != nil {
		return outcome{kind: "transport", err: c.err, noAnswer: true}
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	res, err := c.client.NextIds(ctx, c.msg)
	if err != nil {
		kind, noAnswer := grpcGoKind(err)
		return outcome{kind: kind, err: err, noAnswer: noAnswer}
	}
	return unaryOutcome(res.GetIds(), c.want, c.collect, ids)
}

func (c *grpcGoUnaryCaller) close() {
	if c.conn != nil {
		_ = c.conn.Close()
	}
}

// grpcGoKind is grpcKind for grpc-go's errors: a status the server sent is
// "grpc_" and its code; a deadline or a connection that failed is timeout or
// transport. grpc-go reports a failed connection as Unavailable too, with a
// message of its own transport's.
func grpcGoKind(err error) (kind string, noAnswer bool) {
	st, _ := status.FromError(err)
	msg := st.Message()
	switch {
	case st.Code() == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
		return "timeout", true
	case st.Code() == codes.Unavailable && (strings.HasPrefix(msg, "connection error") ||
		strings.HasPrefix(msg, "error reading from server") || strings.HasPrefix(msg, "error writing to server")):
		return "transport", true
	}
	// connect's codes are gRPC's, with the same numbers.
	return "grpc_" + connect.Code(st.Code()).String(), false
}
