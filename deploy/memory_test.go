package deploy_test

// The largest request the binary accepts against the memory the
// Deployment gives it.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/internal/testkit"
)

// memoryLimit returns the memory limit of the Deployment's container, in
// bytes.
func memoryLimit(t *testing.T) int64 {
	t.Helper()
	var dep struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Resources struct {
						Limits struct {
							Memory string `yaml:"memory"`
						} `yaml:"limits"`
					} `yaml:"resources"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	}
	one(t, loadManifests(t), "Deployment", &dep)
	if len(dep.Template.Spec.Containers) != 1 {
		t.Fatalf("got %d containers, want 1", len(dep.Template.Spec.Containers))
	}
	q := dep.Template.Spec.Containers[0].Resources.Limits.Memory
	for suffix, unit := range map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30} {
		if v, ok := strings.CutSuffix(q, suffix); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				break
			}
			return n * unit
		}
	}
	t.Fatalf("the Deployment's memory limit %q: want a number of Ki, Mi or Gi", q)
	return 0
}

// vmHWM returns the peak resident set of process pid, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s+([0-9]+) kB$`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("/proc/%d/status has no VmHWM", pid)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// TestLargestRequestFitsMemoryLimit runs the binary with the largest
// --max-count its --help admits and sends one request of that count to
// GET /ids, to a namespace, and to gRPC's NextIds, each on a fresh node:
// its peak resident set must stay below half the memory limit of the
// Deployment, the other half being for requests at the same time and the
// garbage collector's slack (the binary runs with GOGC=400). With the old
// limit, 16777216, one request took 1.5 GB against 256 MiB.
func TestLargestRequestFitsMemoryLimit(t *testing.T) {
	limit := memoryLimit(t)
	m := regexp.MustCompile(`(?s)--max-count N\s.*?\b1 to\s+([0-9]+)\b`).FindStringSubmatch(usage(t, "serve"))
	if m == nil {
		t.Fatal("idgen serve --help does not say the largest --max-count as `1 to N`")
	}
	largest := m[1]
	bin := idgenBinary(t)
	for _, kind := range []string{"snowflake", "segment", "grpc"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			dsn := "sqlite:" + filepath.Join(dir, "idgen.db")
			addrFile := filepath.Join(dir, "addr")
			var logs bytes.Buffer
			cmd := exec.Command(bin, "serve", "--dsn", dsn, "--listen", "127.0.0.1:0", "--addr-file", addrFile, "--max-count", largest, "--drain-window", "0")
			cmd.Env = testkit.Env() // GOGC as the binary sets it
			cmd.Stdout, cmd.Stderr = &logs, &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			})
			base := "http://" + waitAddr(t, addrFile)
			if out, err := exec.Command(bin, "namespaces", "create", "bench", "--dsn", dsn).CombinedOutput(); err != nil {
				t.Fatalf("namespaces create: %v\n%s", err, out)
			}
			request := func(count string) {
				t.Helper()
				req, _ := http.NewRequest(http.MethodGet, base+"/ids?count="+count, nil)
				switch kind {
				case "segment":
					req.URL.RawQuery += "&namespace=bench"
				case "grpc":
					n, _ := strconv.ParseUint(count, 10, 64)
					req, _ = http.NewRequest(http.MethodPost, base+"/idgen.v1.IdService/NextIds",
						bytes.NewReader(append([]byte{0x10}, uvarint(n)...))) // NextIdsRequest{count: n}
					req.Header.Set("Content-Type", "application/proto")
				}
				client := &http.Client{Timeout: 2 * time.Minute} // a bound on a hang
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK || n == 0 {
					t.Fatalf("%s of %s IDs: got status %d, %d bytes; want 200 and the IDs\n%s", kind, count, resp.StatusCode, n, logs.String())
				}
			}
			for range 3 {
				request("10")
			}
			before := vmHWM(t, cmd.Process.Pid)
			request(largest)
			after := vmHWM(t, cmd.Process.Pid)
			t.Logf("%s: count=%s VmHWM %d MiB before, %d MiB after; limit %d MiB", kind, largest, before>>20, after>>20, limit>>20)
			if after > limit/2 {
				t.Errorf("one %s request of %s IDs (the largest --max-count) took the node's peak resident set from %d MiB to %d MiB, "+
					"more than half the Deployment's memory limit of %d MiB", kind, largest, before>>20, after>>20, limit>>20)
			}
		})
	}
}

// waitAddr waits (bounded) for idgen serve to write its --addr-file and
// answer /readyz, and returns the address.
func waitAddr(t *testing.T, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a bound on a hang
	defer cancel()
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			addr := strings.TrimSpace(string(b))
			if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return addr
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("idgen serve not ready within a minute")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// uvarint returns n as a protobuf varint.
func uvarint(n uint64) []byte {
	var b []byte
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}
