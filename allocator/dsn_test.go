package allocator

import (
	"strings"
	"testing"
)

func TestRedactDSN(t *testing.T) {
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
	}
	for _, tt := range tests {
		got := RedactDSN(tt.in)
		if got != tt.want {
			t.Errorf("RedactDSN(%q): got %q, want %q", tt.in, got, tt.want)
		}
		if strings.Contains(got, "s3cret") {
			t.Errorf("RedactDSN(%q) leaks the password: %q", tt.in, got)
		}
	}
}
