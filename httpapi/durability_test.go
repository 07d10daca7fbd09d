package httpapi_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDurabilityShown checks that the durability found at start is on
// /readyz and the status page, and that it does not decide readiness.
func TestDurabilityShown(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, tc := range []struct {
		durability string
		class      string // of the status page's span; "" for no row
	}{
		{"unsafe: synchronous_commit=off (overridden)", "bad"},
		{"ok", "ok"},
		{"ok (warning: synchronous_standby_names='')", "bad"},
		{"", ""},
	} {
		cfg := e.config()
		cfg.Durability = tc.durability
		h := e.handler(cfg)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		var ready map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &ready); err != nil {
			t.Fatalf("/readyz: %v in %s", err, rec.Body)
		}
		got, has := ready["durability"]
		if rec.Code != 200 || ready["ready"] != true {
			t.Errorf("Durability %q: /readyz got %d ready %v, want 200 true: durability does not decide readiness", tc.durability, rec.Code, ready["ready"])
		}
		if tc.durability == "" && has || tc.durability != "" && got != tc.durability {
			t.Errorf("Durability %q: /readyz got durability %v (present %v)", tc.durability, got, has)
		}

		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		page := rec.Body.String()
		row := `<dd class="durability"><span class="` + tc.class + `">` + strings.ReplaceAll(tc.durability, "'", "&#39;") + `</span></dd>`
		if tc.class == "" {
			if strings.Contains(page, `class="durability"`) {
				t.Errorf("status page shows a durability row for an empty Durability")
			}
		} else if !strings.Contains(page, row) {
			t.Errorf("Durability %q: status page lacks %s", tc.durability, row)
		}
	}
}
