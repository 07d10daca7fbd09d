package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testserver"
)

func TestBareServer(t *testing.T) {
	ts := httptest.NewServer(bareServer().Handler)
	defer ts.Close()
	tests := []struct {
		path       string
		wantStatus int
		wantBody   string
	}{
		{"/ids", http.StatusOK, string(bareBody)},
		{"/ids?count=1", http.StatusOK, string(bareBody)},
		{"/other", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		resp, err := http.Get(ts.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tt.wantStatus {
			t.Errorf("GET %s: status %d, want %d", tt.path, resp.StatusCode, tt.wantStatus)
		}
		if tt.wantBody != "" {
			if string(body) != tt.wantBody {
				t.Errorf("GET %s: body %q, want %q", tt.path, body, tt.wantBody)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("GET %s: Content-Type %q, want application/json", tt.path, ct)
			}
		}
	}
}

// TestBareEcho runs the bare-echo subcommand, loads it with the tool and
// stops it as a signal would.
func TestBareEcho(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testserver.LogBuffer
	done := make(chan int, 1)
	go func() { done <- mainRun(ctx, []string{"bare-echo", "--listen", "127.0.0.1:0"}, &stdout, &stderr) }()

	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); {
		if line, ok := strings.CutPrefix(stdout.String(), "bare-echo listening on "); ok {
			url = strings.TrimSpace(line)
			break
		}
		select {
		case code := <-done:
			t.Fatalf("bare-echo exited early with %d: %s", code, stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	if url == "" {
		t.Fatalf("bare-echo printed no address; stdout %q stderr %q", stdout.String(), stderr.String())
	}

	var out, errOut bytes.Buffer
	code := mainRun(context.Background(), []string{"--url", url, "--requests", "200", "--conns", "4", "--quiet", "--check-unique=false", "--json"}, &out, &errOut)
	if code != exitOK || !strings.Contains(out.String(), `"requests":200`) || !strings.Contains(out.String(), `"errors":0`) {
		t.Errorf("load against bare-echo: exit %d, stdout %s, stderr %s; want 200 requests, no errors", code, out.String(), errOut.String())
	}

	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("bare-echo exit code = %d, want %d; stderr: %s", code, exitOK, stderr.String())
	}
}

func TestBareEchoRefusesRemote(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := mainRun(context.Background(), []string{"bare-echo", "--listen", "0.0.0.0:0"}, &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "not a loopback address") {
		t.Errorf("bare-echo --listen 0.0.0.0:0: exit %d stderr %q, want %d and a refusal", code, stderr.String(), exitUsage)
	}
}
