package sqlite

import (
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
)

// The two writes whose latency the durability setting decides: a segment
// fetch (one UPDATE … RETURNING, committed) and a lease heartbeat (one
// transaction). Compare synchronous=NORMAL and FULL with benchstat; see
// docs/benchmarks.md.

func BenchmarkFetchSegment(b *testing.B) {
	s := openTest(b)
	ctx := b.Context()
	if _, err := s.CreateNamespace(ctx, allocator.Namespace{
		Name: "bench", Step: 1000, MinStep: 1000, MaxStep: 1000,
		Mode: allocator.ModeBuffered, Fallback: allocator.FallbackNone,
	}); err != nil {
		b.Fatalf("CreateNamespace: %v", err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.FetchSegment(ctx, "bench", 1000); err != nil {
			b.Fatalf("FetchSegment: %v", err)
		}
	}
}

func BenchmarkHeartbeat(b *testing.B) {
	s := openTest(b)
	ctx := b.Context()
	res, err := s.Claim(ctx, allocator.ClaimRequest{
		MinWorkerID: 0, MaxWorkerID: 0, Holder: "bench", TTL: time.Minute, CeilingMS: 1,
	})
	if err != nil {
		b.Fatalf("Claim: %v", err)
	}
	req := allocator.HeartbeatRequest{
		Key: res.Lease.LeaseKey, Holder: "bench", FencingVersion: res.Lease.FencingVersion, TTL: time.Minute,
	}
	for b.Loop() {
		req.CeilingMS++
		if _, _, err := s.Heartbeat(ctx, req); err != nil {
			b.Fatalf("Heartbeat: %v", err)
		}
	}
}
