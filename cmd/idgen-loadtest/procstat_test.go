package main

import (
	"context"
	"os"
	"strings"
	"testing"
)

func TestReadProcSelf(t *testing.T) {
	s, err := readProc(os.Getpid())
	if err != nil {
		t.Fatalf("readProc(self): %v", err)
	}
	if s.rssKB <= 0 || s.hwmKB < s.rssKB {
		t.Errorf("rss %d kB, peak %d kB: want 0 < rss ≤ peak", s.rssKB, s.hwmKB)
	}
	if s.cpu < 0 {
		t.Errorf("cpu = %v, want ≥ 0", s.cpu)
	}
	if _, err := os.Stat("/proc/self/schedstat"); err == nil && s.runqWait < 0 {
		t.Errorf("runqWait = %v, want it read where schedstat exists", s.runqWait)
	}
	if _, err := readProc(-1); err == nil {
		t.Error("readProc(-1): want an error")
	}
	busy, err := machineBusy()
	if err != nil || busy <= 0 {
		t.Errorf("machineBusy() = %v, %v; want a positive time", busy, err)
	}
}

func TestParseKB(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"\t   27120 kB\n", 27120},
		{" 0 kB", 0},
		{"junk", 0},
	}
	for _, tt := range tests {
		if got := parseKB([]byte(tt.in)); got != tt.want {
			t.Errorf("parseKB(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestRunReportsServerProcess(t *testing.T) {
	srv := &idServer{}
	// The test process stands in for the server's.
	res, err := run(context.Background(), config{Target: startIDServer(t, srv), Conns: 1, Count: 1, Requests: 20, ServerPID: os.Getpid()})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.Server == nil || res.Server.PID != os.Getpid() || res.Server.RSSKB <= 0 {
		t.Errorf("server = %+v, want this process with its RSS", res.Server)
	}
	if !strings.Contains(summary(res), "server CPU ") {
		t.Errorf("summary %q lacks the server's CPU and RSS", summary(res))
	}
}
