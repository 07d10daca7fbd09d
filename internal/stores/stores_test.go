package stores

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator/etcd"
	"github.com/idgen-project/idgen/allocator/mysql"
	"github.com/idgen-project/idgen/allocator/postgres"
	"github.com/idgen-project/idgen/internal/dburl"
)

func TestOpenUnknownScheme(t *testing.T) {
	_, err := Open(context.Background(), "oracle://u:s3cret@h/db")
	if !errors.Is(err, ErrUnknownScheme) {
		t.Fatalf("got %v, want ErrUnknownScheme", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error leaks the password: %v", err)
	}
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

// TestOpenSplitsAsTheDriver opens DSNs whose password holds the canary
// written in every place a driver and idgen's masker could disagree on, at
// a closed loopback port, through each store and its driver (pgx, the
// MySQL driver, the etcd client): either Open refuses the DSN with
// dburl.ErrNotEncoded, or the canary lands in the password alone, which
// no error shows.
func TestOpenSplitsAsTheDriver(t *testing.T) {
	const canary = "CanaryTail"
	hp := "127.0.0.1:" + closedPort(t)
	for _, tt := range []struct {
		dsn     string
		refused bool
	}{
		{"postgres://alice:abc@" + canary + "@" + hp + "/x", true},
		{"postgresql://alice:abc@" + canary + "@" + hp + "/x", true},
		{"mysql://alice:abc@" + canary + "@" + hp + "/x", true},
		{"etcd://alice:abc@" + canary + "@" + hp + "/x?dial_timeout=1s", true},
		{"postgres://alice:abc/" + canary + "@" + hp + "/x", true},
		{"mysql://alice:abc/" + canary + "@" + hp + "/x", true},
		{"etcd://alice:abc/" + canary + "@" + hp + "/x?dial_timeout=1s", true},
		{"postgres://alice:abc?" + canary + "@" + hp + "/x", true},
		{"postgres://alice:abc#" + canary + "@" + hp + "/x", true},
		{"etcd://alice:abc#" + canary + "@" + hp + "/x?dial_timeout=1s", true},
		{"postgres://" + hp + "/x?password=abc@" + canary, true},
		{"postgres://" + hp + "?password=abc@" + canary, true},
		// Percent-encoded, as the refusal says: the canary is the
		// password's, and stays hidden.
		{"postgres://alice:abc%40" + canary + "@" + hp + "/x", false},
		{"mysql://alice:abc%40" + canary + "@" + hp + "/x", false},
		{"etcd://alice:abc%40" + canary + "@" + hp + "/x?dial_timeout=1s", false},
		{"postgres://alice:abc%2F" + canary + "%3F%23@" + hp + "/x", false},
		{"postgres://alice@" + hp + "/x?password=abc%40" + canary, false},
		// Parameters that net/url drops but pgx reads.
		{"postgres://alice@" + hp + "/x?password=" + canary + ";x=1", false},
		{"postgres://alice@" + hp + "/x?password=" + canary + "%zz", false},
		{"postgres://alice@" + hp + "/x?pass%77ord=" + canary + "%zz", false},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		s, err := Open(ctx, tt.dsn)
		cancel()
		if err == nil {
			_ = s.Close()
			t.Errorf("Open(%s): got no error, want one", dburl.Redact(tt.dsn))
			continue
		}
		if got := errors.Is(err, dburl.ErrNotEncoded); got != tt.refused {
			t.Errorf("Open(%s): got %v, want ErrNotEncoded %v", dburl.Redact(tt.dsn), err, tt.refused)
		}
		if strings.Contains(err.Error(), canary) {
			t.Errorf("Open(%s): the error shows the password: %v", dburl.Redact(tt.dsn), err)
		}
		if strings.Contains(dburl.Redact(tt.dsn), canary) {
			t.Errorf("Redact shows the password: %s", dburl.Redact(tt.dsn))
		}
	}
}

// TestStoreOpenChecksDSN: each store's own Open, which library users call
// without internal/stores, refuses a DSN its driver would split elsewhere
// than the masker, without showing it.
func TestStoreOpenChecksDSN(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(ctx context.Context, dsn string) error
		dsn  string
	}{
		{"postgres", func(ctx context.Context, dsn string) error { _, err := postgres.Open(ctx, dsn); return err },
			"postgres://alice:abc@SECRETTAIL@127.0.0.1:1/x"},
		{"mysql", func(ctx context.Context, dsn string) error { _, err := mysql.Open(ctx, dsn); return err },
			"mysql://alice:abc@SECRETTAIL@127.0.0.1:1/x"},
		{"etcd", func(ctx context.Context, dsn string) error { _, err := etcd.Open(ctx, dsn); return err },
			"etcd://alice:abc@SECRETTAIL@127.0.0.1:1/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.open(t.Context(), tc.dsn)
			if err == nil || !strings.Contains(err.Error(), "%40") || strings.Contains(err.Error(), "SECRETTAIL") {
				t.Errorf("Open: got %v, want a refusal that says %%40 and names nothing of the DSN", err)
			}
		})
	}
}
