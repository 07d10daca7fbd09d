package rpcapi_test

import (
	"testing"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testserver"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
)

// TestNextIdsStride: over gRPC, a namespace with stride 3 and offset 2
// answers the IDs slot×3+2, and its ranges spell exactly those IDs (one
// range per ID, since none are consecutive), in NextIds and StreamIds.
func TestNextIdsStride(t *testing.T) {
	srv := testserver.MustStart(t, testserver.Options{})
	step, stride, offset := int64(7), int64(3), int64(2)
	srv.CreateNamespace(t, allocator.NamespaceSpec{Name: "orders", Step: &step, Stride: &stride, Offset: &offset})
	conn := dial(t, srv.Addr().String())
	ctx := t.Context()

	var resp idgenv1.NextIdsResponse
	if err := conn.Invoke(ctx, procNextIds, &idgenv1.NextIdsRequest{Namespace: "orders", Count: 10}, &resp); err != nil {
		t.Fatalf("NextIds: %v", err)
	}
	ids := resp.GetIds()
	for i, id := range ids {
		if want := int64(i+1)*3 + 2; id != want {
			t.Fatalf("NextIds: got IDs %v, want 5, 8, 11, …", ids)
		}
	}
	rs := resp.GetRanges()
	if len(rs) != len(ids) {
		t.Fatalf("NextIds: got %d ranges %v for %d IDs, want one per ID", len(rs), rs, len(ids))
	}
	for i, r := range rs {
		if r.GetFirst() != ids[i] || r.GetLast() != ids[i] {
			t.Errorf("range %d: got [%d, %d], want [%d, %d]", i, r.GetFirst(), r.GetLast(), ids[i], ids[i])
		}
	}

	msgs, err := streamAll(ctx, conn, &idgenv1.StreamIdsRequest{Namespace: "orders", BatchSize: 4, Total: 20})
	if err != nil {
		t.Fatalf("StreamIds: %v", err)
	}
	prev := ids[len(ids)-1]
	n := 0
	for _, m := range msgs {
		for _, r := range m.GetRanges() {
			if r.GetFirst() != r.GetLast() || r.GetFirst() <= prev || r.GetFirst()%3 != 2 {
				t.Fatalf("StreamIds: got range [%d, %d] after %d, want one ID above it, ≡ 2 (mod 3)", r.GetFirst(), r.GetLast(), prev)
			}
			prev = r.GetFirst()
			n++
		}
	}
	if n != 20 {
		t.Errorf("StreamIds total 20: got %d IDs", n)
	}
}
