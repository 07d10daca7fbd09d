package httpapi

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// benchLimiter returns a limiter, with its metrics, whose rate no
// benchmark reaches, and reports the benchmark's allocations.
func benchLimiter(b *testing.B) *limiter {
	b.Helper()
	l := newLimiter(RateLimit{Rate: 1e9})
	if err := newRateMetrics(prometheus.NewRegistry(), l); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	return l
}

// BenchmarkLimiterAddress is the limiter's own cost per request by client
// address, below its rate.
func BenchmarkLimiterAddress(b *testing.B) {
	l := benchLimiter(b)
	for b.Loop() {
		if l.allowAddress("192.0.2.1:1234") != nil {
			b.Fatal("limited")
		}
	}
}

// BenchmarkLimiterToken is the limiter's own cost per request by token.
func BenchmarkLimiterToken(b *testing.B) {
	l := benchLimiter(b)
	for b.Loop() {
		if l.allowToken("orders-api") != nil {
			b.Fatal("limited")
		}
	}
}
