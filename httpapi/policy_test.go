package httpapi_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idgen-project/idgen/httpapi"
)

// TestPolicyShown: the status page shows StatusSettings.Policy as a table,
// and leaves the table out without one.
func TestPolicyShown(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, tc := range []struct {
		name   string
		policy []httpapi.PolicySetting
		want   []string
	}{
		{"none", nil, nil},
		{"two settings", []httpapi.PolicySetting{
			{Name: "Lease margin before the deadline", Value: "3s", Flag: "lease-margin"},
			{Name: "Random sequence start", Value: "on", Flag: "random-sequence-start"},
		}, []string{
			`<tr data-setting="lease-margin"><td>Lease margin before the deadline</td><td class="value">3s</td><td class="muted">--lease-margin</td></tr>`,
			`<tr data-setting="random-sequence-start"><td>Random sequence start</td><td class="value">on</td><td class="muted">--random-sequence-start</td></tr>`,
		}},
	} {
		cfg := e.config()
		cfg.Status.Policy = tc.policy
		rec := httptest.NewRecorder()
		e.handler(cfg).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		page := rec.Body.String()
		if has := strings.Contains(page, `<table id="policy">`); has != (tc.policy != nil) {
			t.Errorf("%s: got a policy table %v, want %v", tc.name, has, tc.policy != nil)
		}
		for _, row := range tc.want {
			if !strings.Contains(page, row) {
				t.Errorf("%s: status page lacks the row %s", tc.name, row)
			}
		}
	}
}
