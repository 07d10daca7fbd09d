package deploy_test

// Agreement with the idgen binary: the environment variables the deployment
// files set, the default port and the metrics the alerts and docs name.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/app"
	"github.com/idgen-project/idgen/audit"
	"github.com/idgen-project/idgen/internal/testkit"
	"github.com/idgen-project/idgen/internal/testserver"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// idgenBinary builds cmd/idgen once per test process, stamped with
// stampedVersion as deploy/Dockerfile stamps its VERSION.
func idgenBinary(t *testing.T) string {
	t.Helper()
	stamp := "-X " + versionVariable(t) + "=" + stampedVersion
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "idgen-deploy-test-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "idgen")
		buildErr = testkit.Build(t.Context(), binPath, "./cmd/idgen", "-ldflags", stamp)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// usage returns the --help text of an idgen subcommand.
func usage(t *testing.T, sub string) string {
	t.Helper()
	out, err := exec.Command(idgenBinary(t), sub, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("idgen %s --help: %v\n%s", sub, err, out)
	}
	return string(out)
}

// TestEnvironmentKnownToBinary checks every IDGEN_ variable the deployment
// files set against the variables `idgen serve --help` and `idgen migrate
// --help` document, and the port of the binary's default --listen against
// the port the deployment files use.
func TestEnvironmentKnownToBinary(t *testing.T) {
	serve := usage(t, "serve")
	migrate := usage(t, "migrate")

	m := regexp.MustCompile(`(?s)--listen ADDR .*?\(default\s+([0-9.]+:[0-9]+)\)`).FindStringSubmatch(serve)
	if m == nil {
		t.Fatalf("idgen serve --help does not show the default --listen:\n%s", serve)
	}
	_, defPort, _ := net.SplitHostPort(m[1])
	stages := parseDockerfile(t, "Dockerfile")
	_, imagePort, _ := net.SplitHostPort(stages[len(stages)-1].envValue("IDGEN_LISTEN"))
	if defPort != imagePort {
		t.Errorf("the binary listens on port %s by default, the image on %s", defPort, imagePort)
	}

	known := func(file, name string) {
		if !strings.Contains(serve, "["+name+"]") && !strings.Contains(migrate, "["+name+"]") {
			t.Errorf("%s uses %s, which neither idgen serve nor idgen migrate reads", file, name)
		}
	}
	envRE := regexp.MustCompile(`\bIDGEN_[A-Z_]+\b`)
	for _, file := range []string{"Dockerfile", "k8s/deployment.yaml", "k8s/secret.yaml", "k8s/migrate-job.yaml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range slices.Compact(slices.Sorted(slices.Values(envRE.FindAllString(string(data), -1)))) {
			known(file, name)
		}
	}
	// The compose file's own variables (${IDGEN_IMAGE} and the like) are
	// read by compose; what it sets in the containers' environment must be
	// idgen's.
	for name, s := range loadCompose(t).Services {
		for k := range s.Environment {
			if strings.HasPrefix(k, "IDGEN_") {
				known("docker-compose.yml service "+name, k)
			}
		}
	}
}

// TestMetricsExist checks that every idgen_ metric the alert rules and
// docs/operations.md name is exported by a real server.
func TestMetricsExist(t *testing.T) {
	families := scrapeMetrics(t).families
	// The etcd store exports the space of its backend and the compaction
	// of its history besides: a node on a cluster of its own does both.
	// It also writes an audit trail, whose metrics exist only then.
	cluster := testkit.StartEtcd(t, testkit.EtcdOptions{Members: 1})
	node := testserver.Options{Store: testserver.OpenStoreDSN(t, cluster.DSN("/idgen/")),
		Audit: app.AuditConfig{Sink: "file:" + filepath.Join(t.TempDir(), "audit.jsonl")}}
	for name := range scrapeNode(t, node).families {
		families[name] = true
	}
	metricRE := regexp.MustCompile(`\bidgen_[a-z_]+\b`)
	for _, file := range []string{"k8s/prometheusrule.yaml", "../docs/operations.md"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		names := slices.Compact(slices.Sorted(slices.Values(metricRE.FindAllString(string(data), -1))))
		if len(names) == 0 {
			t.Errorf("%s names no idgen_ metric", file)
		}
		for _, name := range names {
			base := name
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, suf); ok && families[b] {
					base = b
				}
			}
			if !families[base] && base != audit.DefaultTable {
				t.Errorf("%s names %s, which the server does not export", file, name)
			}
		}
	}
}

// scrape is what an idgen server's /metrics listed.
type scrape struct {
	families map[string]bool // the metric families (# TYPE lines)
	series   []string        // every sample's name and labels, as written
	routes   map[string]bool // the route templates the server answers
}

// scrapeSecret is the token of the scraper's requests.
const scrapeSecret = "scrape-metrics-secret"

// scrapeMetrics starts an idgen server on SQLite, serves a Snowflake and a
// namespace request (so that labelled series exist) and returns what
// /metrics lists.
func scrapeMetrics(t *testing.T) scrape {
	t.Helper()
	// A tokens file, so that the families only a node with callers
	// exports (idgen_tokens and its reload counters) are listed too.
	tokens := filepath.Join(t.TempDir(), "tokens")
	sum := sha256.Sum256([]byte(scrapeSecret))
	if err := os.WriteFile(tokens, []byte("scraper ids "+hex.EncodeToString(sum[:])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return scrapeNode(t, testserver.Options{TokensFile: tokens})
}

// scrapeNode starts an idgen node with opts, serves a Snowflake and a
// namespace request and returns what /metrics lists. With a TokensFile
// the requests carry the scraper's token.
func scrapeNode(t *testing.T, opts testserver.Options) scrape {
	t.Helper()
	srv := testserver.MustStart(t, opts)
	srv.CreateNamespace(t, allocator.NamespaceSpec{Name: "orders", Step: new(int64(100)), MaxStep: new(int64(1000))})

	for _, path := range []string{"/ids?count=2", "/ids?count=2&namespace=orders"} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+scrapeSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: got status %d, want 200", path, resp.StatusCode)
		}
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	s := scrape{families: map[string]bool{}, routes: map[string]bool{}}
	for _, r := range srv.API().Routes() {
		s.routes[r.Path] = true
	}
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			s.families[f[2]] = true
		} else if line != "" && !strings.HasPrefix(line, "#") {
			s.series = append(s.series, line[:strings.LastIndexByte(line, ' ')])
		}
	}
	if len(s.families) == 0 {
		t.Fatal("/metrics lists no metric family")
	}
	return s
}
