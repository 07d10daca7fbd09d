package client

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator/sequence"
	"github.com/idgen-project/idgen/internal/testserver"
)

// TestSequences reserves, confirms and voids through a real node, and
// checks that the server's refusals come back as the core's codes.
func TestSequences(t *testing.T) {
	const mine, theirs = "seq-client-mine-0123456789abcdef", "seq-client-theirs-0123456789abcdef"
	node := testserver.MustStart(t, testserver.Options{Tokens: fmt.Sprintf("mine ids %s\ntheirs ids %s\n", idgen.HashSecret(mine), idgen.HashSecret(theirs))})
	seqs := node.Store().(interface{ Sequences() sequence.Store }).Sequences()
	if _, err := seqs.CreateSequence(t.Context(), sequence.Sequence{Name: "inv", Format: "INV-{yyyy}-{seq:06}", Reset: sequence.ResetYearly}); err != nil {
		t.Fatal(err)
	}
	c, err := New(node.URL, Options{Token: mine})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other, err := New(node.URL, Options{Token: theirs})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx := context.Background()

	r, err := c.Reserve(ctx, "inv", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Numbers) != 3 || r.Numbers[2] != 3 || r.Formatted[0] != "INV-"+r.Period+"-000001" || r.Caller != "mine" || r.State != "reserved" {
		t.Fatalf("reservation: got %+v", r)
	}
	if _, err := other.Void(ctx, "inv", r.ID); !errors.Is(err, ErrForbidden) {
		t.Errorf("void of another's reservation: got %v, want ErrForbidden", err)
	}
	got, err := c.Confirm(ctx, "inv", r.ID)
	if err != nil || got.State != "confirmed" {
		t.Fatalf("confirm: got %+v, %v", got, err)
	}
	if _, err := c.Void(ctx, "inv", r.ID); !errors.Is(err, ErrConflict) {
		t.Errorf("void after confirm: got %v, want ErrConflict", err)
	}
	if _, err := c.Reserve(ctx, "inv", 100000); !errors.Is(err, ErrInvalid) {
		t.Errorf("count above the cap: got %v, want ErrInvalid", err)
	}
	if _, err := c.Reserve(ctx, "nope", 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown sequence: got %v, want ErrNotFound", err)
	}
	if _, err := c.Reserve(ctx, "Bad Name", 1); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("malformed name: got %v, want ErrInvalidInput", err)
	}
	next, err := c.Reserve(ctx, "inv", 1)
	if err != nil || next.Numbers[0] != 4 {
		t.Errorf("next reservation: got %+v, %v; want 4", next, err)
	}
}
