package httpapi_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

// TestDurabilityShown checks that the durability found at start is on
// /readyz, and that it does not decide readiness (the status page's part
// is statuspage.TestDurabilityShown).
func TestDurabilityShown(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, durability := range []string{"unsafe: synchronous_commit=off (overridden)", "ok", "ok (warning: synchronous_standby_names='')", ""} {
		cfg := e.config()
		cfg.Durability = durability
		h := e.handler(cfg)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		var ready map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &ready); err != nil {
			t.Fatalf("/readyz: %v in %s", err, rec.Body)
		}
		got, has := ready["durability"]
		if rec.Code != 200 || ready["ready"] != true {
			t.Errorf("Durability %q: /readyz got %d ready %v, want 200 true: durability does not decide readiness", durability, rec.Code, ready["ready"])
		}
		if durability == "" && has || durability != "" && got != durability {
			t.Errorf("Durability %q: /readyz got durability %v (present %v)", durability, got, has)
		}
	}
}
