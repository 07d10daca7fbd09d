package stores

import (
	"context"
	"errors"
	"strings"
	"testing"
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
