//go:build docker

package deploy_test

// The image built from deploy/Dockerfile, run: its version, its user, its
// HEALTHCHECK and /ids, on the embedded SQLite and on PostgreSQL.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestImage(t *testing.T) {
	image := requireEnv(t, "IDGEN_TEST_IMAGE")
	want := os.Getenv("IDGEN_TEST_IMAGE_VERSION")

	t.Run("version", func(t *testing.T) {
		out := docker(t, "run", "--rm", image, "version")
		m := regexp.MustCompile(`^idgen (\S+) \(`).FindStringSubmatch(out)
		if m == nil || strings.HasPrefix(m[1], "devel") || (want != "" && m[1] != want) {
			t.Errorf("idgen version in the image: got %q, want idgen %s (…), not devel", out, cmp.Or(want, "<a stamped version>"))
		}
	})

	t.Run("sqlite", func(t *testing.T) {
		name := "idgen-test-image-" + randomSuffix(t)
		removeContainer(t, name)
		docker(t, "run", "-d", "--name", name, "-p", "127.0.0.1::8080", image)
		checkServing(t, name, want)
	})

	t.Run("postgres", func(t *testing.T) {
		suffix := randomSuffix(t)
		network := "idgen-test-image-" + suffix
		docker(t, "network", "create", network)
		t.Cleanup(func() { _, _ = run(nil, "docker", "network", "rm", network) })

		password := "tc" + randomSuffix(t) + randomSuffix(t)
		pg := "idgen-test-image-pg-" + suffix
		removeContainer(t, pg)
		docker(t, "run", "-d", "--name", pg, "--network", network, "--network-alias", "postgres",
			"-e", "POSTGRES_PASSWORD="+password, "-e", "POSTGRES_DB=idgen",
			envOr("IDGEN_TEST_POSTGRES_IMAGE", "postgres:15"))
		// Over TCP: during its initialisation the image runs a server that
		// listens on the socket only.
		eventually(t, "PostgreSQL accepting connections", 2*time.Minute, func() (bool, string) {
			out, err := run(nil, "docker", "exec", pg, "pg_isready", "-h", "127.0.0.1", "-U", "postgres")
			return err == nil, out + fmt.Sprint(err)
		})

		name := "idgen-test-image-" + suffix
		removeContainer(t, name)
		dsn := "postgres://postgres:" + password + "@postgres:5432/idgen?sslmode=disable"
		docker(t, "run", "-d", "--name", name, "--network", network, "-p", "127.0.0.1::8080",
			"-e", "IDGEN_DSN="+dsn, image)
		checkServing(t, name, want)

		// The lease it serves under is PostgreSQL's.
		held := docker(t, "exec", pg, "psql", "-U", "postgres", "-d", "idgen", "-tAc",
			"SELECT count(*) FROM worker_leases WHERE holder IS NOT NULL")
		if held != "1" {
			t.Errorf("worker_leases in PostgreSQL: %s held, want 1", held)
		}
		if strings.Contains(containerLogs(t, name), password) {
			t.Error("the database password appears in idgen's log")
		}
	})
}

// checkServing checks a running idgen container: healthy by its own
// HEALTHCHECK, ready, serving /ids through its published port, running as
// the numeric non-root user, and logging the stamped version.
func checkServing(t *testing.T, name, version string) {
	t.Helper()
	eventually(t, name+" healthy", 90*time.Second, func() (bool, string) {
		out, err := run(nil, "docker", "inspect", "-f", "{{.State.Status}} {{.State.Health.Status}}", name)
		return out == "running healthy", out + fmt.Sprint(err)
	})
	addr := publishedAddr(t, name, "8080/tcp")
	eventually(t, name+" ready", 30*time.Second, func() (bool, string) {
		var v map[string]any
		status, err := getJSON("http://"+addr+"/readyz", &v)
		return status == 200 && err == nil, fmt.Sprint(status, err)
	})

	var ids idsResponse
	if _, err := getJSON("http://"+addr+"/ids?count=5", &ids); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, id := range ids.IDs {
		if n, err := strconv.ParseInt(id, 10, 64); err != nil || n <= 0 || seen[id] {
			t.Errorf("GET /ids?count=5: ID %q is not a new positive 64-bit integer", id)
		}
		seen[id] = true
	}
	if len(ids.IDs) != 5 || ids.Source != "snowflake" {
		t.Errorf("GET /ids?count=5: got %d IDs from %q, want 5 Snowflake IDs", len(ids.IDs), ids.Source)
	}

	if user := docker(t, "inspect", "-f", "{{.Config.User}}", name); user != "10001:10001" {
		t.Errorf("image user %q, want 10001:10001", user)
	}
	status := docker(t, "exec", name, "cat", "/proc/1/status")
	if m := regexp.MustCompile(`(?m)^Uid:\s+(\d+)`).FindStringSubmatch(status); m == nil || m[1] != "10001" {
		t.Errorf("idgen runs as %v, want UID 10001", m)
	}

	// The version idgen logs when it starts (JSON logs in the image).
	logs := containerLogs(t, name)
	var start struct {
		Msg     string `json:"msg"`
		Version string `json:"version"`
	}
	for _, line := range strings.Split(logs, "\n") {
		if json.Unmarshal([]byte(line), &start) == nil && start.Msg == "idgen starting" {
			break
		}
	}
	if start.Msg == "" || strings.HasPrefix(start.Version, "devel") || (version != "" && start.Version != version) {
		t.Errorf("idgen starting: version %q, want %s", start.Version, cmp.Or(version, "a stamped version, not devel"))
	}
}
