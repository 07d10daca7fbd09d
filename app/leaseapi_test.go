package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/internal/testserver"
)

func TestValidateLeaseAPI(t *testing.T) {
	for _, tc := range []struct {
		name     string
		min, max time.Duration
		want     string
	}{
		{"min below 1s", 999 * time.Millisecond, 0, "invalid LeaseSettings.MinTTL 999ms"},
		{"min negative", -time.Second, 0, "LeaseSettings.MinTTL -1s"},
		{"min not whole ms", 3*time.Second + time.Microsecond, 0, "want whole milliseconds"},
		{"max below min", 10 * time.Second, 5 * time.Second, "invalid LeaseSettings.MaxTTL 5s"},
		{"max below the default min", 0, 2 * time.Second, "LeaseSettings.MaxTTL 2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := app.Config{DSN: "sqlite:idgen.db", LeaseAPI: idgen.LeaseSettings{MinTTL: tc.min, MaxTTL: tc.max}}
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	ok := app.Config{DSN: "sqlite:idgen.db", LeaseAPI: idgen.LeaseSettings{MinTTL: time.Second, MaxTTL: time.Second}}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate of a 1s..1s lease API: %v", err)
	}
}

// TestLeaseAPIBounds: the lease API grants the node's ttl brought within
// its bounds to a request that names none, and bounds every ceiling by
// the node's own max clock offset.
func TestLeaseAPIBounds(t *testing.T) {
	const secret = "app-test-leases-secret"
	for _, tc := range []struct {
		name     string
		nodeTTL  time.Duration
		min, max time.Duration
		wantTTL  int64
	}{
		{"node ttl within", 5 * time.Second, 0, 0, 5000},
		{"node ttl below the minimum", time.Second, 0, 0, 3000},
		{"node ttl above the maximum", 30 * time.Second, 2 * time.Second, 4 * time.Second, 4000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := app.Open(context.Background(), app.Config{
				Store:    testserver.OpenStore(t, "sqlite"),
				Listen:   "127.0.0.1:0",
				Tokens:   "caller leases " + idgen.HashSecret(secret),
				Keeper:   allocator.KeeperSettings{TTL: tc.nodeTTL, MaxClockOffset: 2 * time.Second, WorkerIDs: &allocator.WorkerRange{Min: 0, Max: 0}},
				LeaseAPI: idgen.LeaseSettings{MinTTL: tc.min, MaxTTL: tc.max},
			})
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = a.Serve() }()
			defer a.Close(context.Background())
			req, _ := http.NewRequest(http.MethodPost, "http://"+a.Addr().String()+"/v1/leases",
				strings.NewReader(`{"holder":"h","workers":{"min":1,"max":1},"ceiling_ms":99999999999999}`))
			req.Header.Set("Authorization", "Bearer "+secret)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got struct {
				TTLMS            int64 `json:"ttl_ms"`
				CeilingMS        int64 `json:"ceiling_ms"`
				DBTimeMS         int64 `json:"db_time_ms"`
				MaxClockOffsetMS int64 `json:"max_clock_offset_ms"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 201 {
				t.Fatalf("acquire: status %d, %+v, %v", resp.StatusCode, got, err)
			}
			if got.TTLMS != tc.wantTTL || got.MaxClockOffsetMS != 2000 {
				t.Errorf("acquire without a ttl: ttl_ms %d, max_clock_offset_ms %d; want %d and the node's 2000", got.TTLMS, got.MaxClockOffsetMS, tc.wantTTL)
			}
			if limit := got.DBTimeMS + got.TTLMS + 2000; got.CeilingMS > limit+1 {
				t.Errorf("ceiling %d above db time + ttl + the node's max offset = %d", got.CeilingMS, limit)
			}
		})
	}
}
