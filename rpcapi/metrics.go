package rpcapi

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics is the gRPC API's Prometheus metrics and their interceptor.
type metrics struct {
	serverOnly
	requests *prometheus.CounterVec   // procedure, code
	duration *prometheus.HistogramVec // procedure
	sent     *prometheus.CounterVec   // procedure
	streams  prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idgen_grpc_requests_total",
			Help: "gRPC, gRPC-Web and Connect calls answered, by procedure (/idgen.v1.IdService/NextIds) and status code (ok, invalid_argument, unavailable, …).",
		}, []string{"procedure", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idgen_grpc_request_duration_seconds",
			Help:    "Time from the start of a call to its status, by procedure; for a stream, its whole life.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"procedure"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idgen_grpc_stream_messages_sent_total",
			Help: "Messages sent on server streams, by procedure.",
		}, []string{"procedure"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idgen_grpc_streams_open",
			Help: "Server streams open now.",
		}),
	}
}

// Collectors returns the gRPC API's metrics, for the registry /metrics
// serves.
func (s *Server) Collectors() []prometheus.Collector {
	m := s.metrics
	return []prometheus.Collector{m.requests, m.duration, m.sent, m.streams}
}

func (m *metrics) done(procedure string, start time.Time, err error) {
	code := "ok"
	if err != nil {
		code = codeOf(err).String()
	}
	m.requests.WithLabelValues(procedure, code).Inc()
	m.duration.WithLabelValues(procedure).Observe(time.Since(start).Seconds())
}

func (m *metrics) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		resp, err := next(ctx, req)
		m.done(req.Spec().Procedure, start, err)
		return resp, err
	}
}

func (m *metrics) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		procedure := conn.Spec().Procedure
		m.streams.Inc()
		defer m.streams.Dec()
		err := next(ctx, countingConn{conn, m.sent.WithLabelValues(procedure)})
		m.done(procedure, start, err)
		return err
	}
}

type countingConn struct {
	connect.StreamingHandlerConn
	sent prometheus.Counter
}

func (c countingConn) Send(msg any) error {
	err := c.StreamingHandlerConn.Send(msg)
	if err == nil {
		c.sent.Inc()
	}
	return err
}
