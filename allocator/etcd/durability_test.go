package etcd

import (
	"errors"
	"strings"
	"testing"

	"github.com/idgen-project/idgen/internal/testkit"
)

// TestCheckDurability checks that the test cluster, whose members fsync,
// shows no risk.
func TestCheckDurability(t *testing.T) {
	s := openTest(t)
	risks, err := s.CheckDurability(t.Context())
	if err != nil {
		t.Fatalf("CheckDurability: %v", err)
	}
	if len(risks) != 0 {
		t.Errorf("CheckDurability on members that fsync: got %v, want no risk", risks)
	}
}

// TestCheckDurabilityNoFsync checks that a cluster whose members run with
// --unsafe-no-fsync is refused: one risk per member, none a warning.
func TestCheckDurabilityNoFsync(t *testing.T) {
	c := testkit.StartEtcd(t, testkit.EtcdOptions{Flags: []string{"--unsafe-no-fsync"}})
	s := openDSN(t, c.DSN("idgen"))
	risks, err := s.CheckDurability(t.Context())
	if err != nil {
		t.Fatalf("CheckDurability: %v", err)
	}
	if len(risks) != testkit.EtcdMembers {
		t.Fatalf("CheckDurability with --unsafe-no-fsync: got %d risks %v, want %d", len(risks), risks, testkit.EtcdMembers)
	}
	for i, r := range risks {
		if r.Warning || r.Setting != "unsafe-no-fsync" || !strings.HasPrefix(r.Value, "true on member m") ||
			!strings.Contains(r.Fix, "without --unsafe-no-fsync") {
			t.Errorf("risk %d: got %+v, want a refusal naming the member and the flag", i, r)
		}
	}
}

func TestJudgeDurability(t *testing.T) {
	const committed = 100
	tests := []struct {
		name    string
		probe   memberProbe
		risk    bool
		warning bool
	}{
		{"fsynced", memberProbe{fsynced: true, applied: -1}, false, false},
		{"applied without fsync", memberProbe{applied: committed}, true, false},
		{"applied past it without fsync", memberProbe{applied: committed + 5}, true, false},
		{"not applied yet", memberProbe{applied: committed - 1}, true, true},
		{"metrics unreadable", memberProbe{applied: -1, err: errors.New("connection refused")}, true, true},
		{"status unreadable", memberProbe{applied: -1}, true, true},
	}
	for _, tt := range tests {
		p := tt.probe
		p.name, p.url = "m1", "http://127.0.0.1:2379"
		risks := judgeDurability([]*memberProbe{&p}, committed)
		if got := len(risks) == 1; got != tt.risk || len(risks) > 1 {
			t.Errorf("%s: got risks %v, want a risk: %v", tt.name, risks, tt.risk)
			continue
		}
		if tt.risk && risks[0].Warning != tt.warning {
			t.Errorf("%s: got warning %v, want %v (%+v)", tt.name, risks[0].Warning, tt.warning, risks[0])
		}
		if tt.risk && !strings.Contains(risks[0].Value, "m1") {
			t.Errorf("%s: risk %q does not name the member", tt.name, risks[0].Value)
		}
	}
	if risks := judgeDurability(nil, 0); risks != nil {
		t.Errorf("no members: got %v, want none", risks)
	}
}
