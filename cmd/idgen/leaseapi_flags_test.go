package main

import (
	"strings"
	"testing"
	"time"
)

// TestServeLeaseAPIFlags: --lease-api-min-ttl and --lease-api-max-ttl, from
// the command line or the environment, reach app.Config; bad values are
// usage errors that name the flag.
func TestServeLeaseAPIFlags(t *testing.T) {
	c, err := parseServe([]string{"--lease-api-min-ttl", "2s"}, envOf(map[string]string{"IDGEN_LEASE_API_MAX_TTL": "90s"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.app.LeaseAPI; got.MinTTL != 2*time.Second || got.MaxTTL != 90*time.Second {
		t.Errorf("lease API bounds: got %s..%s, want 2s..1m30s", got.MinTTL, got.MaxTTL)
	}
	c, err = parseServe(nil, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.app.LeaseAPI; got.MinTTL != 3*time.Second || got.MaxTTL != 5*time.Minute {
		t.Errorf("default lease API bounds: got %s..%s, want 3s..5m0s", got.MinTTL, got.MaxTTL)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--lease-api-min-ttl", "0"}, "invalid --lease-api-min-ttl 0s (IDGEN_LEASE_API_MIN_TTL)"},
		{[]string{"--lease-api-max-ttl", "0s"}, "invalid --lease-api-max-ttl 0s (IDGEN_LEASE_API_MAX_TTL)"},
		{[]string{"--lease-api-min-ttl", "500ms"}, "invalid --lease-api-min-ttl 500ms: want whole milliseconds, at least 1s"},
		{[]string{"--lease-api-min-ttl", "10s", "--lease-api-max-ttl", "5s"}, "invalid --lease-api-max-ttl 5s: want whole milliseconds, at least --lease-api-min-ttl 10s"},
		{[]string{"--lease-api-max-ttl", "soon"}, "lease-api-max-ttl"},
	} {
		_, err := parseServe(tc.args, envOf(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("idgen serve %v: got %v, want a usage error containing %q", tc.args, err, tc.want)
		}
	}
}

// envOf is an environment holding vars only.
func envOf(vars map[string]string) env {
	return env{getenv: func(k string) string { return vars[k] }}
}
