package etcd

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseDSN(t *testing.T) {
	tests := []struct {
		dsn        string
		endpoints  []string
		prefix     string
		user, pass string
		tls        bool
		timeURLs   []string
	}{
		{
			dsn:       "etcd://h1:2379,h2:2379,h3:2379/idgen",
			endpoints: []string{"h1:2379", "h2:2379", "h3:2379"}, prefix: "/idgen/",
			timeURLs: []string{"http://h1:2379/version", "http://h2:2379/version", "http://h3:2379/version"},
		},
		{
			dsn:       "etcd://h1,h2:23790",
			endpoints: []string{"h1:2379", "h2:23790"}, prefix: "/idgen/",
			timeURLs: []string{"http://h1:2379/version", "http://h2:23790/version"},
		},
		{
			dsn:       "etcds://idgen:p%40ss:w0rd@[::1]:2379,10.0.0.2/a/b/",
			endpoints: []string{"[::1]:2379", "10.0.0.2:2379"}, prefix: "/a/b/", user: "idgen", pass: "p@ss:w0rd", tls: true,
			timeURLs: []string{"https://[::1]:2379/version", "https://10.0.0.2:2379/version"},
		},
		{
			dsn:       "etcd://u@h/p?server_name=etcd.internal&dial_timeout=2s",
			endpoints: []string{"h:2379"}, prefix: "/p/", user: "u", tls: true,
			timeURLs: []string{"https://h:2379/version"},
		},
		{
			dsn:       "etcd://h/p?time_urls=http://h:2381/version,http://g:2381/version",
			endpoints: []string{"h:2379"}, prefix: "/p/",
			timeURLs: []string{"http://h:2381/version", "http://g:2381/version"},
		},
	}
	for _, tt := range tests {
		cfg, err := parseDSN(tt.dsn)
		if err != nil {
			t.Errorf("parseDSN(%q): %v", tt.dsn, err)
			continue
		}
		if !slices.Equal(cfg.endpoints, tt.endpoints) || cfg.prefix != tt.prefix || cfg.username != tt.user ||
			cfg.password != tt.pass || (cfg.tls != nil) != tt.tls || !slices.Equal(cfg.timeURLs, tt.timeURLs) {
			t.Errorf("parseDSN(%q): got endpoints %q prefix %q user %q pass %q tls %v time %q; want %q %q %q %q %v %q",
				tt.dsn, cfg.endpoints, cfg.prefix, cfg.username, cfg.password, cfg.tls != nil, cfg.timeURLs,
				tt.endpoints, tt.prefix, tt.user, tt.pass, tt.tls, tt.timeURLs)
		}
	}
	if cfg, _ := parseDSN("etcd://u@h/p?server_name=x&dial_timeout=2s"); cfg.dialTimeout != 2*time.Second || cfg.tls.ServerName != "x" {
		t.Errorf("dial_timeout and server_name: got %v %q, want 2s \"x\"", cfg.dialTimeout, cfg.tls.ServerName)
	}
}

func TestParseDSNErrors(t *testing.T) {
	const secret = "s3cr3t-pw"
	for _, dsn := range []string{
		"postgres://h/db",
		"etcd:/h",
		"etcd://u:" + secret + "@/prefix",
		"etcd://u:" + secret + "@h1,,h2/p",
		"etcd://u:" + secret + "@h/p?sslmode=disable",
		"etcd://u:" + secret + "@h/p?cert_file=c.pem",
		"etcd://u:" + secret + "@h/p?ca_file=/nonexistent/ca.pem",
		"etcd://u:" + secret + "@h/p?dial_timeout=soon",
		"etcd://u:" + secret + "@h/p?time_urls=ftp://h/x",
		"etcd://u:" + secret + "%zz@h/p",
		"etcd://h/p?%zz",
	} {
		if _, err := parseDSN(dsn); err == nil {
			t.Errorf("parseDSN(%q): got no error", dsn)
		} else if strings.Contains(err.Error(), secret) {
			t.Errorf("parseDSN(%q): error shows the password: %v", dsn, err)
		}
	}
}

// TestOpenErrorsHidePassword checks that no error of Open shows the
// DSN's password, whether the DSN is malformed or the cluster unreachable.
func TestOpenErrorsHidePassword(t *testing.T) {
	const secret = "s3cr3t-pw"
	for _, dsn := range []string{
		"etcd://idgen:" + secret + "@127.0.0.1:1/idgen?dial_timeout=1s",
		"etcds://idgen:" + secret + "@127.0.0.1:1,127.0.0.1:2/idgen?dial_timeout=1s",
		"etcd://idgen:" + secret + "@127.0.0.1:1/idgen?bogus=1",
		"etcd://idgen:" + secret + "@[::1/idgen",
		"etcd://idgen:" + secret + "%zz@127.0.0.1:1/idgen",
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		s, err := Open(ctx, dsn)
		cancel()
		if err == nil {
			_ = s.Close()
			t.Errorf("Open(%s) succeeded, want an error", redact(dsn))
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"etcd://u:s3cr3t@h1:2379,h2:2379/idgen", "etcd://u:xxxxx@h1:2379,h2:2379/idgen"},
		{"etcds://h1/idgen?ca_file=%2Fca.pem", "etcds://h1/idgen?ca_file=%2Fca.pem"},
		{"etcd://h/p?password=s3cr3t", "etcd://h/p?password=xxxxx"},
	} {
		if got := redact(tc.in); got != tc.want {
			t.Errorf("redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
