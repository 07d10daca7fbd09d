package etcd

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testkit"
)

// TestTLSAndAuth runs the store against a member that serves TLS only,
// requires client certificates and has authentication enabled: the DSN's
// CA, certificate and key files and its user and password get it in
// (store time included: the members' clocks are read over HTTPS with the
// same certificate), and a DSN short of any of them does not, with errors
// that never show the password.
func TestTLSAndAuth(t *testing.T) {
	const secret = "s3cr3t-pw"
	sec := testkit.StartSecureEtcd(t, secret)
	ctx := t.Context()

	s := openDSN(t, sec.DSN("idgen-secure"))
	res, err := s.Claim(ctx, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 1, Holder: "a", TTL: time.Minute, CeilingMS: 5})
	if err != nil {
		t.Fatalf("Claim over TLS with auth: %v", err)
	}
	if _, _, err := s.Heartbeat(ctx, allocator.HeartbeatRequest{Key: res.Lease.LeaseKey, Holder: "a", FencingVersion: 1, TTL: time.Minute}); err != nil {
		t.Fatalf("Heartbeat over TLS with auth: %v", err)
	}
	if _, err := s.CreateNamespace(ctx, allocator.Namespace{Name: "orders", Step: 10, MinStep: 1, MaxStep: 100,
		Mode: allocator.ModeStrict, Fallback: allocator.FallbackNone}); err != nil {
		t.Fatalf("CreateNamespace: %v", err)
	}
	if seg, err := s.FetchSegment(ctx, "orders", 5); err != nil || seg.First != 1 || seg.Last != 5 {
		t.Fatalf("FetchSegment: got [%d, %d], %v; want [1, 5]", seg.First, seg.Last, err)
	}

	u, err := url.Parse(sec.DSN("idgen-secure"))
	if err != nil {
		t.Fatalf("parse the secure DSN: %v", err)
	}
	without := func(change func(u *url.URL, q url.Values)) string {
		c := *u
		q := c.Query()
		change(&c, q)
		c.RawQuery = q.Encode()
		return c.String()
	}
	for _, tc := range []struct{ name, dsn string }{
		{"wrong password", without(func(u *url.URL, _ url.Values) { u.User = url.UserPassword("root", secret+"-wrong") })},
		{"no password", without(func(u *url.URL, _ url.Values) { u.User = nil })},
		{"no client certificate", without(func(_ *url.URL, q url.Values) { q.Del("cert_file"); q.Del("key_file") })},
		{"no CA", without(func(_ *url.URL, q url.Values) { q.Del("ca_file") })},
		{"plain text", strings.Replace(without(func(_ *url.URL, q url.Values) {
			q.Del("ca_file")
			q.Del("cert_file")
			q.Del("key_file")
		}), "etcds://", "etcd://", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			s, err := Open(ctx, tc.dsn)
			if err == nil {
				// Without a user, Open's ping may get through; no lease call may.
				defer s.Close()
				_, err = s.Claim(ctx, allocator.ClaimRequest{DatacenterID: 0, MinWorkerID: 0, MaxWorkerID: 1, Holder: "b", TTL: time.Minute})
			}
			if err == nil {
				t.Fatalf("a store opened and claimed with %s", tc.name)
			}
			t.Logf("refused: %v", err)
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}
