package metrics

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/probe"
)

type fixedSpace probe.SpaceReport

func (f fixedSpace) Report() probe.SpaceReport { return probe.SpaceReport(f) }

// gather returns the series of c as "name{label=value} value" lines,
// sorted.
func gather(t *testing.T, c prometheus.Collector) []string {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			name := mf.GetName()
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			out = append(out, name+" "+formatValue(m))
		}
	}
	slices.Sort(out)
	return out
}

func formatValue(m *dto.Metric) string {
	return strconv.FormatFloat(m.GetGauge().GetValue(), 'f', -1, 64)
}

func TestSpaceCollector(t *testing.T) {
	if got := gather(t, newSpaceCollector(fixedSpace{})); len(got) != 0 {
		t.Errorf("before a sample: got %v, want no series", got)
	}
	r := probe.SpaceReport{Sampled: true, Growth: 12.5,
		StoreSpace: allocator.StoreSpace{Size: 4000, InUse: 1000, Quota: 8000, Revision: 77, Alarms: []string{"NOSPACE", "SOMETHING"}}}
	want := []string{
		`idgen_database_alarm{alarm=CORRUPT} 0`,
		`idgen_database_alarm{alarm=NOSPACE} 1`,
		`idgen_database_alarm{alarm=SOMETHING} 1`,
		`idgen_database_quota_bytes 8000`,
		`idgen_database_revision 77`,
		`idgen_database_size_bytes 4000`,
		`idgen_database_size_growth_bytes_per_second 12.5`,
		`idgen_database_size_in_use_bytes 1000`,
	}
	if got := gather(t, newSpaceCollector(fixedSpace(r))); !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// No quota reported (etcd before 3.6): no quota series.
	r.Quota, r.Alarms = 0, nil
	got := gather(t, newSpaceCollector(fixedSpace(r)))
	if slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "idgen_database_quota_bytes") }) ||
		!slices.Contains(got, `idgen_database_alarm{alarm=NOSPACE} 0`) {
		t.Errorf("without a quota and alarms: got %v, want no quota series and NOSPACE 0", got)
	}
}
