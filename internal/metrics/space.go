package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idgen-project/idgen/internal/probe"
)

// SpaceReporter gives the latest space sample: *probe.Space.
type SpaceReporter interface {
	Report() probe.SpaceReport
}

// watchedAlarms are always reported (0 or 1), so alerts need no absent().
var watchedAlarms = []string{"NOSPACE", "CORRUPT"}

// spaceCollector reports the latest space sample; nothing before one.
type spaceCollector struct {
	src                                       SpaceReporter
	size, inUse, quota, growth, alarm, revSet *prometheus.Desc
}

func newSpaceCollector(src SpaceReporter) *spaceCollector {
	return &spaceCollector{
		src: src,
		size: prometheus.NewDesc("idgen_database_size_bytes",
			"Bytes the database takes on disk: etcd's backend of its largest member (DbSize), as last sampled.", nil, nil),
		inUse: prometheus.NewDesc("idgen_database_size_in_use_bytes",
			"Bytes of the database that hold data (etcd's DbSizeInUse); the rest are free pages a defragmentation gives back.", nil, nil),
		quota: prometheus.NewDesc("idgen_database_quota_bytes",
			"Size past which the database refuses writes (etcd's --quota-backend-bytes, as members of etcd 3.6 on report it); absent when unknown.", nil, nil),
		growth: prometheus.NewDesc("idgen_database_size_growth_bytes_per_second",
			"Growth of idgen_database_size_bytes over the last minute.", nil, nil),
		alarm: prometheus.NewDesc("idgen_database_alarm",
			"1 while the database has raised the alarm (etcd: NOSPACE refuses every write until an operator compacts, defragments and disarms it).",
			[]string{"alarm"}, nil),
		revSet: prometheus.NewDesc("idgen_database_revision",
			"The database's current revision (etcd), as last sampled.", nil, nil),
	}
}

func (c *spaceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.size, c.inUse, c.quota, c.growth, c.alarm, c.revSet} {
		ch <- d
	}
}

func (c *spaceCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.src.Report()
	if !r.Sampled {
		return
	}
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	g(c.size, float64(r.Size))
	g(c.inUse, float64(r.InUse))
	if r.Quota > 0 {
		g(c.quota, float64(r.Quota))
	}
	g(c.growth, r.Growth)
	g(c.revSet, float64(r.Revision))
	raised := map[string]bool{}
	for _, a := range r.Alarms {
		raised[a] = true
	}
	for _, a := range watchedAlarms {
		g(c.alarm, b2f(raised[a]), a)
		delete(raised, a)
	}
	for a := range raised {
		g(c.alarm, 1, a)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
