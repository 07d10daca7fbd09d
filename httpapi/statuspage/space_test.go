package statuspage

import (
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/probe"
)

// TestSpaceNotices: the database's space needs attention well before the
// quota (past probe.SpaceAttention of it, or a quota reached within a day
// at the current growth), NOSPACE is critical and says what to run, and a
// history nobody compacts is a warning.
func TestSpaceNotices(t *testing.T) {
	const mb = 1000 * 1000
	byIdgen := probe.Compaction{ByNode: true, Retention: 5 * time.Minute, Text: "by idgen"}
	report := func(size, quota int64, growth float64, c probe.Compaction, alarms ...string) probe.SpaceReport {
		return probe.SpaceReport{Sampled: true, StoreSpace: allocator.StoreSpace{Size: size, InUse: size / 2, Quota: quota, Alarms: alarms},
			Growth: growth, Compaction: c}
	}
	tests := []struct {
		name string
		in   probe.SpaceReport
		want []string // "critical: title" or "warning: title", in order
	}{
		{"small and compacted", report(10*mb, 2000*mb, 0, byIdgen), nil},
		{"no quota known", report(10*mb, 0, 1000, byIdgen), nil},
		{"past the attention share", report(1300*mb, 2000*mb, 0, byIdgen), []string{"warning: Database at 65% of its quota"}},
		{"growing toward the quota", report(100*mb, 2000*mb, 100*1000, byIdgen), []string{"warning: Database growing toward its quota"}},
		{"growing slowly", report(100*mb, 2000*mb, 1000, byIdgen), nil},
		{"NOSPACE", report(2000*mb, 2000*mb, 0, byIdgen, "NOSPACE"), []string{"critical: Database out of space: etcd raised the NOSPACE alarm"}},
		{"CORRUPT", report(10*mb, 2000*mb, 0, byIdgen, "CORRUPT"), []string{"critical: Database alarm raised: CORRUPT"}},
		{"never compacted", report(10*mb, 2000*mb, 0, probe.Compaction{Text: "none seen"}), []string{"warning: etcd history never compacted"}},
		{"compacted by etcd", report(10*mb, 2000*mb, 0, probe.Compaction{Seen: true, Text: "by others"}), nil},
		{"not sampled yet", probe.SpaceReport{Compaction: byIdgen}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			var got []string
			var details []string
			for _, n := range attention(attentionInput{DatabaseOK: true, Space: &in}) {
				got = append(got, n.Class()+": "+n.Title)
				details = append(details, n.Detail)
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if tt.name == "NOSPACE" && len(details) == 1 {
				for _, cmd := range []string{"etcdctl compact", "etcdctl defrag --cluster", "etcdctl alarm disarm", "docs/operations.md"} {
					if !strings.Contains(details[0], cmd) {
						t.Errorf("NOSPACE notice %q does not say %q", details[0], cmd)
					}
				}
			}
		})
	}
}

func TestSpaceText(t *testing.T) {
	tests := []struct {
		in   probe.SpaceReport
		want string
	}{
		{probe.SpaceReport{}, ""},
		{probe.SpaceReport{Sampled: true, StoreSpace: allocator.StoreSpace{Size: 14_700_000, InUse: 3_100_000, Quota: 25_165_824}, Growth: 735_000},
			"Backend 14.7 MB of a 25.2 MB quota (58%), 3.1 MB in use, growing 735.0 kB/s."},
		{probe.SpaceReport{Sampled: true, StoreSpace: allocator.StoreSpace{Size: 950, InUse: 950}}, "Backend 950 B, 950 B in use."},
	}
	for _, tt := range tests {
		if got := spaceText(tt.in); got != tt.want {
			t.Errorf("spaceText(%+v): got %q, want %q", tt.in, got, tt.want)
		}
	}
}
