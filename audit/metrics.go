package audit

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Collectors returns the recorder's metrics.
func (r *Recorder) Collectors() []prometheus.Collector {
	counter := func(name, help string, v func(Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v(r.Stats())) })
	}
	return []prometheus.Collector{
		counter("idgen_audit_events_total", "Audit events accepted into the buffer.", func(s Stats) int64 { return s.Recorded }),
		counter("idgen_audit_sent_total", "Audit events the sink acknowledged.", func(s Stats) int64 { return s.Sent }),
		counter("idgen_audit_dropped_total", "Audit events dropped because the buffer was full (or not sent at shutdown).", func(s Stats) int64 { return s.Dropped }),
		counter("idgen_audit_send_failures_total", "Failed writes of a batch to the audit sink.", func(s Stats) int64 { return s.Failures }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idgen_audit_queued", Help: "Audit events waiting to be sent."},
			func() float64 { return float64(r.Stats().Queued) }),
	}
}

// Notice returns the status page's audit line when it needs attention
// (drops or a failing sink); ok is false when all is well.
func (r *Recorder) Notice() (title, detail string, ok bool) {
	s := r.Stats()
	switch {
	case s.Dropped > 0:
		return "Audit events dropped", fmt.Sprintf("%d audit events dropped since start (buffer of %d full); %d waiting for %s. Last error: %s",
			s.Dropped, r.s.Buffer, s.Queued, s.Sink, orNone(s.LastErr)), true
	case s.LastErr != "":
		return "Audit sink failing", fmt.Sprintf("%d audit events wait for %s (buffer of %d): %s", s.Queued, s.Sink, r.s.Buffer, s.LastErr), true
	}
	return "", "", false
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
