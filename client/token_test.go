package client

import (
	"errors"
	"strings"
	"testing"

	"github.com/idgen-project/idgen/internal/testserver"
)

// TestToken: against a node with tokens, a Client without Options.Token is
// refused with ErrUnauthorized, one with a token of another scope with
// ErrForbidden, and one with an ids token is served; the token never shows
// in an error.
func TestToken(t *testing.T) {
	node := testserver.MustStart(t, testserver.Options{Tokens: brokerTokens})
	for _, tc := range []struct {
		name  string
		token string
		want  error // nil: served
	}{
		{"no token", "", ErrUnauthorized},
		{"unknown token", "wrong", ErrUnauthorized},
		{"token without the ids scope", leaseToken, ErrForbidden},
		{"ids token", idsToken, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t, node.URL, Options{Token: tc.token, MaxAttempts: 1}, newFakeClock())
			_, err := c.Next(bg)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Next: got %v, want %v", err, tc.want)
			}
			if _, err := c.Parse(bg, 1); tc.want != nil && !errors.Is(err, tc.want) || tc.want == nil && err != nil {
				t.Fatalf("Parse: got %v, want %v", err, tc.want)
			}
			if err != nil && tc.token != "" && strings.Contains(err.Error(), tc.token) {
				t.Errorf("the error holds the token: %v", err)
			}
		})
	}
	if _, err := New(node.URL, Options{Token: "a\nb"}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("New with a token holding a newline: got %v, want ErrInvalidInput", err)
	}
}
