package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/testserver"
)

// spaceStore reports the space the test sets, as the etcd store does.
type spaceStore struct {
	stores.Store
	sp *atomic.Pointer[allocator.StoreSpace]
}

func (s spaceStore) Space(context.Context) (allocator.StoreSpace, error) { return *s.sp.Load(), nil }

// TestReadyzNamesTheAlarm: /readyz shows the database's space to every
// caller and names a raised NOSPACE alarm, without deciding readiness by
// it (the lease does); a store that cannot say shows no space at all.
func TestReadyzNamesTheAlarm(t *testing.T) {
	sp := &atomic.Pointer[allocator.StoreSpace]{}
	sp.Store(&allocator.StoreSpace{Size: 5000, InUse: 4000, Quota: 5000, Revision: 9, Alarms: []string{"NOSPACE"}})
	e := newEnv(t, envOptions{store: spaceStore{testserver.OpenStore(t, "sqlite"), sp}})
	rec := e.do("GET", "/readyz", "")
	var r struct {
		Ready    bool
		Database struct {
			Reachable bool
			Alarm     string
			Space     *struct {
				SizeBytes  int64    `json:"size_bytes"`
				QuotaBytes int64    `json:"quota_bytes"`
				Alarms     []string `json:"alarms"`
			}
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("/readyz: %v in %s", err, rec.Body)
	}
	if !r.Ready || !r.Database.Reachable || !strings.HasPrefix(r.Database.Alarm, "NOSPACE: ") ||
		!strings.Contains(r.Database.Alarm, "disarm") || r.Database.Space == nil ||
		r.Database.Space.SizeBytes != 5000 || r.Database.Space.QuotaBytes != 5000 || strings.Join(r.Database.Space.Alarms, ",") != "NOSPACE" {
		t.Errorf("/readyz with NOSPACE raised: got %d %s, want ready (the lease decides), the alarm named and the space shown", rec.Code, rec.Body)
	}

	plain := newEnv(t, envOptions{})
	if body := plain.do("GET", "/readyz", "").Body.String(); strings.Contains(body, `"space"`) || strings.Contains(body, `"alarm"`) {
		t.Errorf("/readyz of a store without space figures: got %s, want neither space nor alarm", body)
	}
}
