package deploy_test

// The nginx balancers of docker-compose.yml: what they do when a node dies,
// drains or cannot prove its lease.

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// nginxLocation returns the directives of the block `location PATH {` of
// an nginx configuration, name to arguments, "" when there is none.
func nginxLocation(text, path string) map[string][]string {
	start := strings.Index(text, "location "+path+" {")
	if start < 0 {
		return nil
	}
	var code strings.Builder // the text from the block on, without comments
	for _, line := range strings.Split(text[start:], "\n") {
		line, _, _ = strings.Cut(line, "#")
		code.WriteString(line + "\n")
	}
	body := code.String()
	body = body[strings.Index(body, "{")+1 : strings.Index(body, "}")]
	out := map[string][]string{}
	for _, stmt := range strings.Split(body, ";") {
		if words := strings.Fields(stmt); len(words) > 0 {
			out[words[0]] = words[1:]
		}
	}
	return out
}

// TestBalancerRetries: every balancer sends a request that found a node
// dead, timing out or answering 503 on to the next node, ID requests
// (POST /api/v1/id) included, but not the admin API's changes; it gives
// up quickly on a node that does not accept, and re-reads the nodes'
// addresses every second or so.
func TestBalancerRetries(t *testing.T) {
	confs, err := filepath.Glob(filepath.Join("compose", "nginx-*.conf"))
	if err != nil || len(confs) == 0 {
		t.Fatalf("no compose/nginx-*.conf (%v)", err)
	}
	for _, conf := range confs {
		t.Run(filepath.Base(conf), func(t *testing.T) {
			data, err := os.ReadFile(conf)
			if err != nil {
				t.Fatal(err)
			}
			text := string(data)
			m := regexp.MustCompile(`(?m)^\s*resolver\s[^;]*\bvalid=(\w+)`).FindStringSubmatch(text)
			if m == nil {
				t.Fatal("resolver without valid=: a node that stopped stays in the list as long as nginx's cache")
			}
			if d, err := time.ParseDuration(m[1]); err != nil || d > 2*time.Second {
				t.Errorf("resolver valid=%s: want at most 2s, so that a stopped node drops out quickly", m[1])
			}
			for _, tc := range []struct {
				path  string
				want  []string
				never []string
			}{
				{"/", []string{"error", "timeout", "http_503", "non_idempotent"}, nil},
				{"/admin/", []string{"error", "timeout", "http_503"}, []string{"non_idempotent"}},
			} {
				loc := nginxLocation(text, tc.path)
				if loc == nil {
					t.Errorf("no location %s", tc.path)
					continue
				}
				next := loc["proxy_next_upstream"]
				for _, w := range tc.want {
					if !slices.Contains(next, w) {
						t.Errorf("location %s: proxy_next_upstream %v lacks %s", tc.path, next, w)
					}
				}
				for _, w := range tc.never {
					if slices.Contains(next, w) {
						t.Errorf("location %s: proxy_next_upstream %v has %s", tc.path, next, w)
					}
				}
				if tries := loc["proxy_next_upstream_tries"]; len(tries) != 1 {
					t.Errorf("location %s: proxy_next_upstream_tries %v: want the number of nodes, 3", tc.path, tries)
				} else if n, err := strconv.Atoi(tries[0]); err != nil || n < 3 {
					t.Errorf("location %s: proxy_next_upstream_tries %s: want at least 3, one per node", tc.path, tries[0])
				}
				ct := loc["proxy_connect_timeout"]
				if len(ct) != 1 {
					t.Errorf("location %s: no proxy_connect_timeout (the default, 60s, waits on a dead node)", tc.path)
				} else if d, err := time.ParseDuration(ct[0]); err != nil || d > time.Second {
					t.Errorf("location %s: proxy_connect_timeout %s: want at most 1s", tc.path, ct[0])
				}
			}
		})
	}
}
