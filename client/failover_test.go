package client

import (
	"context"
	"errors"
	"net"
	"testing"
)

// deadURL returns the base URL of a port nobody listens on any more: a
// node killed, whose connections are refused.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestFailoverMovesOn: past a node that refuses connections and one that
// answers 503 (draining, with a long Retry-After), the call succeeds on
// the third node at once, without waiting; the next call goes straight
// to that node.
func TestFailoverMovesOn(t *testing.T) {
	draining, live := startServer(t, true), startServer(t, true)
	draining.faults.inject503(1000, "30")
	clk := newFakeClock()
	// A breaker that opens at the first failure: the failures that move
	// the call on must not count.
	c, err := newFailoverClient([]string{deadURL(t), draining.URL, live.URL}, Options{Breaker: BreakerOptions{Threshold: 1}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ids, err := c.NextN(context.Background(), 3)
	if err != nil || len(ids) != 3 {
		t.Fatalf("NextN past a dead and a draining node: got %v, %v; want 3 IDs", ids, err)
	}
	if s := clk.Slept(); len(s) != 0 {
		t.Errorf("waits before moving on: got %v, want none", s)
	}
	if got := c.BaseURL(); got != live.URL {
		t.Errorf("BaseURL after the failover: got %s, want %s", got, live.URL)
	}
	if got := c.BreakerState(); got != BreakerClosed {
		t.Errorf("breaker after a call that succeeded on the third node: got %s, want closed", got)
	}
	before, liveBefore := draining.faults.requests.Load(), live.faults.requests.Load()
	if _, err := c.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := draining.faults.requests.Load(); got != before {
		t.Errorf("requests to the draining node after the failover: got %d more, want 0", got-before)
	}
	if got := live.faults.requests.Load() - liveBefore; got != 1 {
		t.Errorf("requests to the live node for one Next: got %d, want 1", got)
	}
}

// TestFailoverAllDown: with every node answering 503, a call tries each
// node once at once, then retries with the backoff and the Retry-After,
// and fails with the last answer after MaxAttempts.
func TestFailoverAllDown(t *testing.T) {
	var urls []string
	var all []*testServer
	for range 3 {
		s := startServer(t, true)
		s.faults.inject503(1000, "1")
		urls, all = append(urls, s.URL), append(all, s)
	}
	clk := newFakeClock()
	c, err := newFailoverClient(urls, Options{MaxAttempts: 5, Breaker: BreakerOptions{Threshold: -1}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Next(context.Background())
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Next with every node down: got %v, want ErrUnavailable", err)
	}
	// 5 attempts: two moves at once, then two waits of at least the
	// Retry-After.
	if s := clk.Slept(); len(s) != 2 {
		t.Errorf("waits: got %v, want 2 (the retries after every node was tried)", s)
	}
	var sent int64
	for i, s := range all {
		n := s.faults.requests.Load()
		if n == 0 {
			t.Errorf("node %d got no request, want every node tried", i)
		}
		sent += n
	}
	if sent != 5 {
		t.Errorf("requests: got %d, want 5 (MaxAttempts)", sent)
	}
}

// TestFailoverKeepsNodeOnRefusal: an answer that is not a 503 (an
// unknown namespace) is the service's answer, the same on every node:
// no other node is asked.
func TestFailoverKeepsNodeOnRefusal(t *testing.T) {
	a, b := startServer(t, true), startServer(t, true)
	c, err := newFailoverClient([]string{a.URL, b.URL}, Options{}, newFakeClock())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.NextInNamespace(context.Background(), "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown namespace: got %v, want ErrNotFound", err)
	}
	if got := c.BaseURL(); got != a.URL {
		t.Errorf("BaseURL after a 404: got %s, want %s (no move)", got, a.URL)
	}
	if got := b.faults.requests.Load(); got != 0 {
		t.Errorf("requests to the second node: got %d, want 0", got)
	}
}

func TestNewFailoverRefuses(t *testing.T) {
	tests := []struct {
		name string
		urls []string
	}{
		{"none", nil},
		{"twice", []string{"http://a:8080", "http://a:8080/"}},
		{"not http", []string{"http://a:8080", "ftp://b:8080"}},
		{"credentials", []string{"http://u:secret@a:8080"}},
	}
	for _, tt := range tests {
		c, err := NewFailover(tt.urls, Options{})
		if !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: got %v, %v; want ErrInvalidInput", tt.name, c, err)
		}
	}
}
