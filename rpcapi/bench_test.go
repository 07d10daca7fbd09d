package rpcapi_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"google.golang.org/grpc"

	"github.com/idgen-project/idgen/internal/testserver"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
)

// BenchmarkStreamIds streams Snowflake IDs from a whole node (its keeper
// on SQLite) to a stock gRPC client over loopback TCP and reports IDs/s.
// One worker's physical cap with 12 sequence bits is 4,096,000 IDs/s.
func BenchmarkStreamIds(b *testing.B) {
	srv := testserver.MustStart(b, testserver.Options{MaxCount: 16384})
	conn := dial(b, srv.Addr().String())
	for _, batch := range []int32{1000, 4096, 10000, 16384} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			total := int64(b.N) * int64(batch)
			b.ReportAllocs()
			b.ResetTimer()
			st, err := conn.NewStream(b.Context(), &grpc.StreamDesc{ServerStreams: true}, procStreamIds)
			if err != nil {
				b.Fatal(err)
			}
			if err := st.SendMsg(&idgenv1.StreamIdsRequest{BatchSize: batch, Total: total}); err != nil {
				b.Fatal(err)
			}
			_ = st.CloseSend()
			var got int64
			m := new(idgenv1.StreamIdsResponse)
			for {
				err := st.RecvMsg(m)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range m.GetRanges() {
					got += r.GetLast() - r.GetFirst() + 1
				}
			}
			b.StopTimer()
			if got != total {
				b.Fatalf("received %d IDs, want %d", got, total)
			}
			b.ReportMetric(float64(got)/b.Elapsed().Seconds(), "IDs/s")
		})
	}
}

// BenchmarkNextIdsUnary calls NextIds count=1 from a stock gRPC client,
// and GET /ids?count=1 over HTTP/1.1 keep-alive for comparison, one call
// at a time, on the same node.
func BenchmarkNextIdsUnary(b *testing.B) {
	srv := testserver.MustStart(b, testserver.Options{})
	conn := dial(b, srv.Addr().String())
	b.Run("grpc", func(b *testing.B) {
		req := &idgenv1.NextIdsRequest{Count: 1}
		var resp idgenv1.NextIdsResponse
		b.ReportAllocs()
		for b.Loop() {
			if err := conn.Invoke(b.Context(), procNextIds, req, &resp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("http", func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		b.ReportAllocs()
		for b.Loop() {
			resp, err := client.Get(srv.URL + "/ids?count=1")
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("GET /ids: %d", resp.StatusCode)
			}
		}
	})
}
