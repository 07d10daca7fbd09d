package idgenv1_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
)

// rangeStreamer streams messages of batchSize Snowflake-like IDs split into
// rangesPerMsg ranges, without generating anything: it measures what the
// message format and the transport cost per ID.
type rangeStreamer struct {
	idgenv1connect.UnimplementedIdServiceHandler
	rangesPerMsg int64
}

func (s rangeStreamer) StreamIds(ctx context.Context, req *connect.Request[idgenv1.StreamIdsRequest], stream *connect.ServerStream[idgenv1.StreamIdsResponse]) error {
	batch := int64(req.Msg.GetBatchSize())
	per := batch / s.rangesPerMsg
	ranges := make([]*idgenv1.IdRange, s.rangesPerMsg)
	for i := range ranges {
		ranges[i] = &idgenv1.IdRange{}
	}
	msg := &idgenv1.StreamIdsResponse{
		Ranges: ranges,
		Source: idgenv1.Source_SOURCE_SNOWFLAKE,
		FencingToken: &idgenv1.FencingToken{Token: &idgenv1.FencingToken_Lease{
			Lease: &idgenv1.LeaseToken{Datacenter: 1, Worker: 7, FencingVersion: 12},
		}},
	}
	base := int64(1) << 50 // a Snowflake ID of 2026 is about this large
	for sent := int64(0); sent < req.Msg.GetTotal(); sent += batch {
		for _, r := range ranges {
			r.First = base
			r.Last = base + per - 1
			base += 1 << 22 // the next millisecond
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkStreamIdsLoopback streams IDs over gRPC on cleartext HTTP/2
// through loopback TCP and reports IDs/s: what one stream of this message
// format can carry when the server's generator is free. One worker's
// physical cap with 12 sequence bits is 4,096,000 IDs/s.
func BenchmarkStreamIdsLoopback(b *testing.B) {
	for _, bc := range []struct {
		name         string
		batch        int32
		rangesPerMsg int64
	}{
		{"batch=4096/ranges=1", 4096, 1},
		{"batch=4096/ranges=4", 4096, 4},
		{"batch=1024/ranges=1", 1024, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			mux := http.NewServeMux()
			mux.Handle(idgenv1connect.NewIdServiceHandler(rangeStreamer{rangesPerMsg: bc.rangesPerMsg}))
			var protocols http.Protocols
			protocols.SetUnencryptedHTTP2(true)
			srv := &http.Server{Handler: mux, Protocols: &protocols, ReadHeaderTimeout: 5 * time.Second}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = srv.Serve(ln)
			}()
			defer func() {
				_ = srv.Close()
				<-done
			}()
			tr := &http.Transport{Protocols: &protocols}
			defer tr.CloseIdleConnections()
			client := idgenv1connect.NewIdServiceClient(&http.Client{Transport: tr}, "http://"+ln.Addr().String(), connect.WithGRPC())

			total := int64(b.N) * int64(bc.batch)
			b.ReportAllocs()
			b.ResetTimer()
			stream, err := client.StreamIds(b.Context(), connect.NewRequest(&idgenv1.StreamIdsRequest{BatchSize: bc.batch, Total: total}))
			if err != nil {
				b.Fatal(err)
			}
			var got int64
			for stream.Receive() {
				for _, r := range stream.Msg().GetRanges() {
					got += r.GetLast() - r.GetFirst() + 1
				}
			}
			if err := stream.Err(); err != nil {
				b.Fatal(err)
			}
			_ = stream.Close()
			b.StopTimer()
			if got != total {
				b.Fatalf("received %d IDs, want %d", got, total)
			}
			b.ReportMetric(float64(got)/b.Elapsed().Seconds(), "IDs/s")
		})
	}
}
