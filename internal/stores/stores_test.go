package stores

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://u:s3cret@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"mysql://root@127.0.0.1:3306/test", "mysql://root@127.0.0.1:3306/test"},
		{"postgres://h/db?password=s3cret", "postgres://h/db?password=xxxxx"},
		{"sqlite:idgen.db", "sqlite:idgen.db"},
		{"postgres://u:s3cret@h:99999999999/%zz", "postgres://(DSN not shown: unparsable)"},
	}
	for _, tt := range tests {
		if got := Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q): got %q, want %q", tt.in, got, tt.want)
		}
		if strings.Contains(Redact(tt.in), "s3cret") {
			t.Errorf("Redact(%q) leaks the password", tt.in)
		}
	}
}

func TestOpenUnknownScheme(t *testing.T) {
	_, err := Open(context.Background(), "oracle://u:s3cret@h/db")
	if !errors.Is(err, ErrUnknownScheme) {
		t.Fatalf("got %v, want ErrUnknownScheme", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error leaks the password: %v", err)
	}
}
