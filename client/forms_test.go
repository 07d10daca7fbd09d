package client

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testserver"
	"github.com/idgen-project/idgen/snowflake"
)

// vectors is clients/testvectors/forms.json, which the TypeScript client's
// tests read too.
type vectors struct {
	IDs []struct {
		Width                        int
		ID                           string
		Decimal, Base32, Base62, Hex string
	} `json:"ids"`
	Invalid []struct {
		Width  int
		Format string
		Text   string
	} `json:"invalid"`
}

func TestSharedVectors(t *testing.T) {
	b, err := os.ReadFile("../clients/testvectors/forms.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.IDs) == 0 || len(v.Invalid) == 0 {
		t.Fatalf("forms.json: got %d IDs and %d invalid strings, want some of each", len(v.IDs), len(v.Invalid))
	}
	for _, vec := range v.IDs {
		id, err := DecodeID(vec.ID, FormatDecimal, 63)
		if err != nil {
			t.Fatalf("vector %s: %v", vec.ID, err)
		}
		for _, f := range []struct {
			f    Format
			text string
		}{{FormatDecimal, vec.Decimal}, {FormatBase32, vec.Base32}, {FormatBase62, vec.Base62}, {FormatHex, vec.Hex}} {
			if got := EncodeID(id, f.f, vec.Width); got != f.text {
				t.Errorf("EncodeID(%d, %s, %d): got %q, want %q", id, f.f, vec.Width, got, f.text)
			}
			if got, err := DecodeID(f.text, f.f, vec.Width); err != nil || got != id {
				t.Errorf("DecodeID(%q, %s, %d): got %d, %v, want %d", f.text, f.f, vec.Width, got, err, id)
			}
			if got, err := decodeAnswered(f.text, f.f.String()); err != nil || got != id {
				t.Errorf("decodeAnswered(%q, %s): got %d, %v, want %d", f.text, f.f, got, err, id)
			}
		}
	}
	for _, vec := range v.Invalid {
		f, err := snowflake.ParseFormat(vec.Format)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := DecodeID(vec.Text, f, vec.Width); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("DecodeID(%q, %q, %d): got %d, %v, want ErrInvalidInput", vec.Text, vec.Format, vec.Width, got, err)
		}
	}
}

// TestFormsFromTheServer: a node whose --id-format writes base32 for
// Snowflake IDs and hex for a namespace still gives the client its IDs as
// numbers; Compose and ParseText agree with the node's layout.
func TestFormsFromTheServer(t *testing.T) {
	js53, _ := snowflake.PresetLayout(snowflake.PresetJS53)
	node := testserver.MustStart(t, testserver.Options{
		Keeper:  allocator.KeeperSettings{Layout: js53},
		Formats: map[string]snowflake.Format{"": snowflake.FormatBase32, "orders": snowflake.FormatHex},
	})
	node.CreateNamespace(t, allocator.NamespaceSpec{Name: "orders", Step: new(int64(100))})
	c := newTestClient(t, node.URL, Options{}, newFakeClock())

	ids, err := c.NextN(bg, 500)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(ids) || ids[0] <= 0 || ids[len(ids)-1] > 1<<53-1 {
		t.Fatalf("NextN(500) on js53 in base32: got %d..%d, want increasing IDs up to 2^53 - 1", ids[0], ids[len(ids)-1])
	}
	d, err := c.DrawNamespace(bg, "orders", 3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.IDs, []int64{1, 2, 3}) || len(d.Ranges) != 1 || d.Ranges[0].First != 1 || d.Ranges[0].Last != 3 {
		t.Errorf("DrawNamespace(orders, 3) in hex: got %v %+v, want 1..3", d.IDs, d.Ranges)
	}

	p, err := c.ParseText(bg, EncodeID(ids[7], FormatBase62, 53))
	if err != nil {
		t.Fatal(err)
	}
	if local := js53.Decompose(snowflake.ID(ids[7])); p.ID != ids[7] || p.Worker != local.Worker || p.Sequence != local.Sequence {
		t.Errorf("ParseText(base62 of %d): got %+v, want %+v", ids[7], p, local)
	}
	if _, err := c.ParseText(bg, "not/an/id"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseText(not/an/id): got %v, want ErrInvalid", err)
	}

	at := time.Date(2026, 11, 27, 12, 34, 56, 789_400_000, time.UTC)
	got, err := c.Compose(bg, at)
	if err != nil {
		t.Fatal(err)
	}
	// The js53 vector of forms.json for this millisecond.
	if got.First != 116970687647744 || got.Last != 116970687651839 || !got.Time.Equal(at.Truncate(time.Millisecond)) {
		t.Errorf("Compose(%v): got %+v, want 116970687647744..116970687651839", at, got)
	}
	if _, err := c.Compose(bg, snowflake.DefaultEpoch.Add(-time.Second)); !errors.Is(err, ErrInvalid) {
		t.Errorf("Compose before the epoch: got %v, want ErrInvalid", err)
	}
}
