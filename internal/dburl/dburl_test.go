package dburl

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://u:s3cret@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgres://u@h/db?password=s3cret", "postgres://u@h/db?password=xxxxx"},
		{"postgres://u@h/db?sslpassword=s3cret&sslmode=require", "postgres://u@h/db?sslmode=require&sslpassword=xxxxx"},
		{"mysql://root@127.0.0.1:3306/test", "mysql://root@127.0.0.1:3306/test"},
		{"mysql://root:s3cret@127.0.0.1:3306/test?tls=true", "mysql://root:xxxxx@127.0.0.1:3306/test?tls=true"},
		{"sqlite:idgen.db", "sqlite:idgen.db"},
		{"postgres://u:s3cret@h:5432/%zz", "postgres://(DSN not shown: unparsable)"},
		{"mysql:root:s3cret@tcp(h:3306)/x", "(DSN not shown)"},
		{"root:s3cret@tcp(h:3306)/x", "(DSN not shown)"},
		{"host=h user=u password=s3cret", "(DSN not shown)"},
		{"postgres://u:s3cret@h:99999999999/%zz", "postgres://(DSN not shown: unparsable)"},
		{"postgres://h/db?pwd=s3cret", "postgres://h/db?pwd=xxxxx"},
		{"mysql://u@h/db?auth_token=s3cret", "mysql://u@h/db?auth_token=xxxxx"},
		{"etcd://h1:2379,h2:2379,h3:2379/idgen", "etcd://h1:2379,h2:2379,h3:2379/idgen"},
		{"etcd://idgen:s3cret@h1:2379,h2:2379/idgen", "etcd://idgen:xxxxx@h1:2379,h2:2379/idgen"},
		{"etcds://idgen:s3cret@[::1]:2379,[::1]:2380/idgen?ca_file=ca.pem", "etcds://idgen:xxxxx@[::1]:2379,[::1]:2380/idgen?ca_file=ca.pem"},
		{"etcd://idgen:s3cret@h1,h2", "etcd://idgen:xxxxx@h1,h2"},
		{"etcd://h1/idgen?token=s3cret", "etcd://h1/idgen?token=xxxxx"},
		{"etcd://idgen:s3cret%zz@h1/idgen", "etcd://(DSN not shown: unparsable)"},
		{"etcd://idgen:s3c@ret@h1/idgen", "etcd://idgen:xxxxx@h1/idgen"},
		{"etcd://idgen:s3cret@/idgen", "(DSN not shown)"},
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
