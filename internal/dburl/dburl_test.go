package dburl

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://u:s3cret@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgres://u@h/db?password=s3cret", "postgres://u@h/db?password=xxxxx"},
		{"postgres://u@h/db?sslpassword=s3cret&sslmode=require", "postgres://u@h/db?sslpassword=xxxxx&sslmode=require"},
		{"mysql://root@127.0.0.1:3306/test", "mysql://root@127.0.0.1:3306/test"},
		{"mysql://root:s3cret@127.0.0.1:3306/test?tls=true", "mysql://root:xxxxx@127.0.0.1:3306/test?tls=true"},
		{"sqlite:idgen.db", "sqlite:idgen.db"},
		{"postgres://u:s3cret@h:5432/%zz", "postgres://u:xxxxx@h:5432/%zz"},
		{"mysql:root:s3cret@tcp(h:3306)/x", "(DSN not shown)"},
		{"root:s3cret@tcp(h:3306)/x", "(DSN not shown)"},
		{"host=h user=u password=s3cret", "(DSN not shown)"},
		{"postgres://u:s3cret@h:99999999999/%zz", "postgres://u:xxxxx@h:99999999999/%zz"},
		{"postgres://h/db?pwd=s3cret", "postgres://h/db?pwd=xxxxx"},
		{"mysql://u@h/db?auth_token=s3cret", "mysql://u@h/db?auth_token=xxxxx"},
		{"etcd://h1:2379,h2:2379,h3:2379/idgen", "etcd://h1:2379,h2:2379,h3:2379/idgen"},
		{"etcd://idgen:s3cret@h1:2379,h2:2379/idgen", "etcd://idgen:xxxxx@h1:2379,h2:2379/idgen"},
		{"etcds://idgen:s3cret@[::1]:2379,[::1]:2380/idgen?ca_file=ca.pem", "etcds://idgen:xxxxx@[::1]:2379,[::1]:2380/idgen?ca_file=ca.pem"},
		{"etcd://idgen:s3cret@h1,h2", "etcd://idgen:xxxxx@h1,h2"},
		{"etcd://h1/idgen?token=s3cret", "etcd://h1/idgen?token=xxxxx"},
		{"etcd://idgen:s3cret%zz@h1/idgen", "etcd://idgen:xxxxx@h1/idgen"},
		{"etcd://idgen:s3cret@/idgen", "etcd://idgen:xxxxx@/idgen"},
		// An '@' that is not percent-encoded: pgx and net/url would split
		// the DSN at different '@' signs.
		{"etcd://idgen:s3c@ret@h1/idgen", "etcd://(DSN not shown: not percent-encoded)"},
		{"postgres://alice:abc@s3cret@127.0.0.1:5432/x", "postgres://(DSN not shown: not percent-encoded)"},
		{"postgres://alice:abc%40s3cret@127.0.0.1:5432/x", "postgres://alice:xxxxx@127.0.0.1:5432/x"},
		{"etcd://alice:abc/s3cret@127.0.0.1:2379/x", "etcd://(DSN not shown: not percent-encoded)"},
		{"etcd://alice:abc#s3cret@127.0.0.1:2379/x", "etcd://(DSN not shown: not percent-encoded)"},
		{"postgres://alice:ab?s3cret@127.0.0.1:5432/x", "postgres://(DSN not shown: not percent-encoded)"},
		{"postgres://h?password=ab@s3cret", "postgres://(DSN not shown: not percent-encoded)"},
		// A password where a host belongs (no '@') is a port of letters.
		{"postgres://alice:s3cret/x", "postgres://(DSN not shown: unparsable)"},
		{"postgres://u@h:s3cret/db", "postgres://(DSN not shown: unparsable)"},
		{"postgres://u:s3cret@[::1/idgen", "postgres://(DSN not shown: unparsable)"},
		// Parameters as pgx splits and decodes them: at '&' only, with
		// a ';' or a malformed escape inside a value (which net/url's
		// parser drops, leaving the pair as written).
		{"postgres://u@h/db?password=s3cret;x=1", "postgres://u@h/db?password=xxxxx;x=1"},
		{"postgres://u@h/db?x=1;password=s3cret", "postgres://u@h/db?x=1;password=xxxxx"},
		{"postgres://u@h/db?password=s3%zzcret", "postgres://u@h/db?password=xxxxx"},
		{"postgres://u@h/db?pass%77ord=s3cret", "postgres://u@h/db?pass%77ord=xxxxx"},
		{"postgres://u@h/db?pass%77ord=s3%zzcret&sslmode=disable", "postgres://u@h/db?pass%77ord=xxxxx&sslmode=disable"},
		{"postgres://u:s3cret@[::1]:5432,[::2]:5433/db", "postgres://u:xxxxx@[::1]:5432,[::2]:5433/db"},
		{"postgres://u:s3cret@h/db#password=s3cret", "postgres://u:xxxxx@h/db#password=xxxxx"},
	}
	for _, tt := range tests {
		got := Redact(tt.in)
		if got != tt.want {
			t.Errorf("Redact(%q): got %q, want %q", tt.in, got, tt.want)
		}
		if strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%q) leaks the password: %q", tt.in, got)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		dsn  string
		want error
	}{
		{"postgres://alice:abc%40tail@127.0.0.1:5432/x", nil},
		{"postgres://alice:abc@tail@127.0.0.1:5432/x", ErrNotEncoded},
		{"postgresql://alice:abc@tail@127.0.0.1:5432/x", ErrNotEncoded},
		{"mysql://root:abc@tail@127.0.0.1:3306/test", ErrNotEncoded},
		{"etcd://idgen:abc@tail@h1:2379,h2:2379/idgen", ErrNotEncoded},
		{"etcds://idgen:abc@tail@h1/idgen", ErrNotEncoded},
		{"postgres://alice:ab/tail@127.0.0.1:5432/x", ErrNotEncoded},
		{"postgres://alice:ab?tail@127.0.0.1:5432/x", ErrNotEncoded},
		{"postgres://alice:ab#tail@127.0.0.1:5432/x", ErrNotEncoded},
		{"postgres://h/db?password=ab@tail", ErrNotEncoded},
		{"postgres://h?password=ab@tail", ErrNotEncoded},
		{"postgres://u@h/db@x", ErrNotEncoded},
		{"postgres://u@h/db?options=a%40b", nil},
		{"postgres://h:5432/db?sslmode=disable", nil},
		{"mysql://root@127.0.0.1:3306/test", nil},
		{"etcds://u:p@[::1]:2379,[::1]:2380/idgen?ca_file=ca.pem", nil},
		{"sqlite:/var/lib/idgen/a@b.db", nil},
		{"host=h user=u password=a@b", nil}, // not a URL: no store takes it
	} {
		if got := Check(tt.dsn); !errors.Is(got, tt.want) || (got == nil) != (tt.want == nil) {
			t.Errorf("Check(%q): got %v, want %v", tt.dsn, got, tt.want)
		}
	}
}

func TestDialectOf(t *testing.T) {
	for _, tt := range []struct {
		dsn  string
		want Dialect
	}{
		{"postgres://u@h/db", Postgres},
		{"postgresql://u@h/db", Postgres},
		{"mysql://root@h:3306/test", MySQL},
		{"sqlite:idgen.db", SQLite},
		{"sqlite:///var/lib/idgen/idgen.db", SQLite},
		{"etcd://h1:2379,h2:2379/idgen", Etcd},
		{"etcds://u:p@h1/idgen", Etcd},
		{"etcd:/h", ""},
		{"oracle://u@h/db", ""},
		{"root:pw@tcp(h:3306)/x", ""},
		{"POSTGRES://u@h/db", ""},
		{"", ""},
	} {
		if got := DialectOf(tt.dsn); got != tt.want {
			t.Errorf("DialectOf(%q): got %q, want %q", tt.dsn, got, tt.want)
		}
	}
}

func TestSecrets(t *testing.T) {
	for _, tt := range []struct {
		dsn  string
		want []string // each must be among the secrets found
	}{
		{"postgres://u:s3cret@h:5432/db", []string{"s3cret"}},
		{"postgres://u:s3cret%2Fx@h/db", []string{"s3cret%2Fx", "s3cret/x"}},
		{"postgres://u@h/db?sslmode=disable&password=s3cret", []string{"s3cret"}},
		{"postgres://u@h/db?sslpassword=s3cret", []string{"s3cret"}},
		{"mysql://root:s3cret@[::1/db", []string{"s3cret"}},          // malformed URL
		{"root:s3cret@tcp(127.0.0.1:3306)/test", []string{"s3cret"}}, // driver form
		{"host=h user=u password=s3cret port=5432", []string{"s3cret"}},
		{"mysql://root@h/db?auth_token=t0ken", []string{"t0ken"}},
		{"etcd://idgen:s3cret@h1:2379,h2:2379/idgen", []string{"s3cret"}},
		{"etcds://idgen:s3cret@[::1]:2379,[::1]:2380/idgen", []string{"s3cret"}},
		{"mysql://root@127.0.0.1:3306/test?timeout=2s", nil},
		{"sqlite:idgen.db", nil},
	} {
		got := Secrets(tt.dsn)
		for _, w := range tt.want {
			if !slices.Contains(got, w) {
				t.Errorf("Secrets(%q): got %q, want it to contain %q", tt.dsn, got, w)
			}
		}
		if tt.want == nil && len(got) != 0 {
			t.Errorf("Secrets(%q): got %q, want none", tt.dsn, got)
		}
		for _, s := range got {
			if s == "2s" || s == "root" || s == "u" || s == "h" {
				t.Errorf("Secrets(%q): %q is not a secret", tt.dsn, s)
			}
		}
	}
}

func ExampleRedact() {
	fmt.Println(Redact("postgres://idgen:s3cret@db.internal:5432/idgen?sslmode=require"))
	fmt.Println(Redact("sqlite:/var/lib/idgen/idgen.db"))
	fmt.Println(Redact("host=db.internal password=s3cret"))
	// Output:
	// postgres://idgen:xxxxx@db.internal:5432/idgen?sslmode=require
	// sqlite:/var/lib/idgen/idgen.db
	// (DSN not shown)
}
