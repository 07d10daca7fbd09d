package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestMainRunJSON(t *testing.T) {
	srv := &idServer{}
	url := startIDServer(t, srv)
	var stdout, stderr bytes.Buffer
	code := mainRun(context.Background(), []string{"--url", url, "--conns", "3", "--count", "7", "--requests", "60", "--json", "--quiet", "--label", "snowflake"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit code = %d, want %d; stderr: %s", code, exitOK, stderr.String())
	}
	var res result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	if res.Requests != 60 || res.IDs != 420 || res.Conns != 3 || res.Count != 7 || res.Duplicates != 0 || !res.UniqueCheck {
		t.Errorf("result = %+v, want 60 requests, 420 ids, 3 conns, count 7, uniqueness checked, no duplicates", res)
	}
	if res.Label != "snowflake" {
		t.Errorf("label = %q, want snowflake", res.Label)
	}
	if res.Latency.P999 <= 0 || res.Latency.Max < res.Latency.P999 {
		t.Errorf("latency = %+v, want 0 < p99.9 ≤ max", res.Latency)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr = %q, want nothing with --quiet", stderr.String())
	}
}

func TestMainRunSummary(t *testing.T) {
	srv := &idServer{}
	url := startIDServer(t, srv)
	var stdout, stderr bytes.Buffer
	code := mainRun(context.Background(), []string{"--url", url, "--requests", "30", "--conns", "2"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit code = %d, want %d; stderr: %s", code, exitOK, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"30 requests in ", "over 2 conns", "req/s", "ids/s", "p50 ", "p99 ", "p99.9 ", "max ", "errors 0", "duplicates 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary %q lacks %q", out, want)
		}
	}
	if n := strings.Count(out, "\n"); n != 1 {
		t.Errorf("summary has %d lines, want 1", n)
	}
}

func TestMainRunExitCodes(t *testing.T) {
	good := startIDServer(t, &idServer{})
	dupes := startIDServer(t, &idServer{dupEvery: 2})
	tests := []struct {
		name       string
		args       []string
		want       int
		wantStderr string
	}{
		{name: "help", args: []string{"--help"}, want: exitOK, wantStderr: "Usage: idgen-loadtest"},
		{name: "unknown flag", args: []string{"--nope"}, want: exitUsage, wantStderr: "flag provided but not defined"},
		{name: "extra argument", args: []string{"--url", good, "stray"}, want: exitUsage, wantStderr: `unexpected argument "stray"`},
		{name: "no connections", args: []string{"--url", good, "--conns", "0"}, want: exitUsage, wantStderr: "must be positive"},
		{name: "negative duration", args: []string{"--url", good, "--duration", "-1s"}, want: exitUsage, wantStderr: "must not be negative"},
		{name: "remote target", args: []string{"--url", "http://192.0.2.1:8080", "--requests", "1"}, want: exitUsage, wantStderr: "--allow-remote"},
		{name: "duplicates", args: []string{"--url", dupes, "--requests", "20", "--quiet"}, want: exitDups, wantStderr: "duplicate IDs seen"},
		{name: "duplicates not checked", args: []string{"--url", dupes, "--requests", "20", "--quiet", "--check-unique=false"}, want: exitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			got := mainRun(context.Background(), tt.args, &stdout, &stderr)
			if got != tt.want {
				t.Errorf("mainRun(%q) = %d, want %d; stderr: %s", tt.args, got, tt.want, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}
