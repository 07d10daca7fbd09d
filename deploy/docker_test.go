//go:build docker

package deploy_test

// Tests that run the image and the compose cluster in a Docker engine,
// behind the build tag docker because they need an engine and an image
// built from deploy/Dockerfile beforehand (docs/testing.md):
//
//	docker build -f deploy/Dockerfile -t idgen:test \
//	    --build-arg VERSION="$(git describe --tags --always --dirty)" .
//	IDGEN_TEST_IMAGE=idgen:test go test -tags docker -v -run 'TestImage|TestComposeCluster' ./deploy/
//
// The environment they read:
//
//	IDGEN_TEST_IMAGE           the idgen image to test (required)
//	IDGEN_TEST_IMAGE_VERSION   the VERSION it was built with; checked when set
//	IDGEN_TEST_POSTGRES_IMAGE  PostgreSQL for TestImage (default postgres:15)
//	IDGEN_TEST_COMPOSE         the compose command (default "docker compose")
//	IDGEN_POSTGRES_IMAGE, IDGEN_NGINX_IMAGE
//	                           passed on to docker-compose.yml (see there)
//
// Every container, network and volume they create is removed when they end.
// Their traffic goes to ports published on 127.0.0.1 only.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// dockerTimeout bounds one docker command; pulling is not expected (the
// images are local), starting a container takes seconds.
const dockerTimeout = 3 * time.Minute

// requireEnv returns the environment variable name, failing the test when
// it is not set: a test run with -tags docker asked for these tests.
func requireEnv(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: build the image first (see the comment at the top of docker_test.go)", name)
	}
	return v
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// randomSuffix returns 12 random hex digits, for names and passwords.
func randomSuffix(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// run runs a command with a time limit and returns its standard output,
// trimmed; the error carries standard error.
func run(env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return strings.TrimSpace(string(out)), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// docker runs the docker CLI and fails the test if it fails.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := run(nil, "docker", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// eventually polls check every 250 ms until it returns true or timeout
// passes; then the test fails with what check said last.
func eventually(t *testing.T, what string, timeout time.Duration, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v (last: %s)", what, timeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// removeContainer removes a container when the test ends, first logging the
// end of its output if the test failed.
func removeContainer(t *testing.T, name string) {
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command("docker", "logs", "--tail", "40", name).CombinedOutput()
			t.Logf("docker logs %s:\n%s", name, logs)
		}
		_, _ = run(nil, "docker", "rm", "-f", "-v", name)
	})
}

// containerLogs returns what the container wrote to its standard output
// and error (idgen logs to standard error).
func containerLogs(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("docker", "logs", name).CombinedOutput()
	if err != nil {
		t.Fatalf("docker logs %s: %v: %s", name, err, out)
	}
	return string(out)
}

// publishedAddr returns host:port where the container's port is published.
func publishedAddr(t *testing.T, container, port string) string {
	t.Helper()
	for _, line := range strings.Split(docker(t, "port", container, port), "\n") {
		if strings.HasPrefix(line, "127.0.0.1:") {
			return line
		}
	}
	t.Fatalf("%s: port %s is not published on 127.0.0.1", container, port)
	return ""
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// idsResponse is the body of GET /ids.
type idsResponse struct {
	IDs    []string `json:"ids"`
	Source string   `json:"source"`
}

// getJSON GETs url and decodes a 200 response into v.
func getJSON(url string, v any) (status int, err error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return resp.StatusCode, json.Unmarshal(body, v)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}
