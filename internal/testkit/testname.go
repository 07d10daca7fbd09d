// Names: what a test creates on a shared server (a PostgreSQL schema, a
// MySQL database, an etcd key prefix) is named after the test, so that tests
// never collide and leftovers can be traced to their test.

package testkit

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
)

// UniqueName returns a fresh random name, starting with a short form of the
// test's name: <test>_<16 hex digits>, where <test> is at most 24
// characters of [a-z0-9_] taken from tb.Name().
func UniqueName(tb testing.TB) string {
	tb.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("random name: %v", err)
	}
	var short strings.Builder
	for _, r := range strings.ToLower(tb.Name()) {
		if short.Len() == 24 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			short.WriteRune(r)
		default:
			if s := short.String(); s != "" && !strings.HasSuffix(s, "_") {
				short.WriteByte('_')
			}
		}
	}
	return strings.TrimSuffix(short.String(), "_") + "_" + hex.EncodeToString(b[:])
}
