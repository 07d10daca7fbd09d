package snowflake

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

// formVectors is clients/testvectors/forms.json, computed apart from any
// client (generate.py beside it) and read by the Go and TypeScript tests.
type formVectors struct {
	Layouts map[string]struct {
		Time       int   `json:"time"`
		Datacenter int   `json:"datacenter"`
		Worker     int   `json:"worker"`
		Sequence   int   `json:"sequence"`
		EpochMS    int64 `json:"epoch_ms"`
	} `json:"layouts"`
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
	Compose []struct {
		Layout, Time, First, Last, Error string
	} `json:"compose"`
}

func readVectors(t *testing.T) formVectors {
	t.Helper()
	b, err := os.ReadFile("../clients/testvectors/forms.json")
	if err != nil {
		t.Fatal(err)
	}
	var v formVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("forms.json: %v", err)
	}
	if len(v.IDs) == 0 || len(v.Invalid) == 0 || len(v.Compose) == 0 {
		t.Fatalf("forms.json: got %d ids, %d invalid, %d compose vectors, want some of each", len(v.IDs), len(v.Invalid), len(v.Compose))
	}
	return v
}

func TestFormVectors(t *testing.T) {
	v := readVectors(t)
	for _, vec := range v.IDs {
		id, err := ParseID(vec.ID)
		if err != nil {
			t.Fatalf("vector %q: %v", vec.ID, err)
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
			if strings.Trim(f.text, "0123456789") != "" {
				if got, err := DecodeID(f.text, FormatAny, vec.Width); err != nil || got != id {
					t.Errorf("DecodeID(%q, any, %d): got %d, %v, want %d", f.text, vec.Width, got, err, id)
				}
			}
		}
	}
	for _, vec := range v.Invalid {
		f, err := ParseFormat(vec.Format)
		if err != nil {
			t.Fatalf("vector format %q: %v", vec.Format, err)
		}
		if got, err := DecodeID(vec.Text, f, vec.Width); !errors.Is(err, ErrInvalidID) {
			t.Errorf("DecodeID(%q, %q, %d): got %d, %v, want ErrInvalidID", vec.Text, vec.Format, vec.Width, got, err)
		}
	}
	for _, vec := range v.Compose {
		ll := v.Layouts[vec.Layout]
		l := Layout{TimeBits: ll.Time, DatacenterBits: ll.Datacenter, WorkerBits: ll.Worker, SequenceBits: ll.Sequence, Epoch: time.UnixMilli(ll.EpochMS)}
		if p, ok := PresetLayout(vec.Layout); !ok || p.Diff(l) != "" {
			t.Errorf("vector layout %s: got %s, want the preset %s", vec.Layout, l, p)
		}
		at, err := time.Parse(time.RFC3339Nano, vec.Time)
		if err != nil {
			t.Fatal(err)
		}
		first, last, err := l.Bounds(at)
		if vec.Error != "" {
			if !errors.Is(err, ErrOutOfRange) {
				t.Errorf("%s Bounds(%s): got %v, want ErrOutOfRange", vec.Layout, vec.Time, err)
			}
			continue
		}
		if err != nil || first.String() != vec.First || last.String() != vec.Last {
			t.Errorf("%s Bounds(%s): got %d, %d, %v, want %s, %s", vec.Layout, vec.Time, first, last, err, vec.First, vec.Last)
		}
	}
}

var fixedFormats = []Format{FormatBase32, FormatBase62, FormatHex}

// TestFormsRoundTripAndOrder: for every preset and random valid layouts,
// every form decodes back to the ID it encodes, is exactly FormatWidth
// characters long, and orders random pairs of IDs as their numbers do.
func TestFormsRoundTripAndOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, l := range testLayouts(r, 200) {
		w := l.Width()
		ids := []ID{0, 1, l.MaxID(), l.MaxID() - 1}
		for range 50 {
			ids = append(ids, randomID(t, r, l))
		}
		for _, f := range append([]Format{FormatDecimal}, fixedFormats...) {
			for i, id := range ids {
				s := EncodeID(id, f, w)
				if fw := FormatWidth(f, w); fw > 0 && len(s) != fw {
					t.Fatalf("%s: EncodeID(%d, %s): got %q, want %d characters", l, id, f, s, fw)
				}
				if got, err := DecodeID(s, f, w); err != nil || got != id {
					t.Fatalf("%s: DecodeID(%q, %s): got %d, %v, want %d", l, s, f, got, err, id)
				}
				if f != FormatDecimal && strings.Trim(s, "0123456789") != "" {
					if got, err := DecodeID(s, FormatAny, w); err != nil || got != id {
						t.Fatalf("%s: DecodeID(%q, any): got %d, %v, want %d", l, s, got, err, id)
					}
				}
				if f == FormatDecimal {
					continue
				}
				other := ids[r.IntN(len(ids))]
				if i > 0 {
					other = ids[i-1]
				}
				so := EncodeID(other, f, w)
				if (s < so) != (id < other) || (s == so) != (id == other) {
					t.Fatalf("%s, %s: %d vs %d encode as %q vs %q: string order differs from numeric order", l, f, id, other, s, so)
				}
			}
		}
	}
}

func TestFormatWidth(t *testing.T) {
	tests := []struct {
		width               int
		base32, base62, hex int
	}{
		{63, 13, 11, 16},
		{53, 11, 9, 14},
		{41, 9, 7, 11},
		{1, 1, 1, 1},
	}
	for _, tt := range tests {
		for _, f := range []struct {
			f    Format
			want int
		}{{FormatBase32, tt.base32}, {FormatBase62, tt.base62}, {FormatHex, tt.hex}, {FormatDecimal, 0}} {
			if got := FormatWidth(f.f, tt.width); got != f.want {
				t.Errorf("FormatWidth(%s, %d): got %d, want %d", f.f, tt.width, got, f.want)
			}
		}
	}
	// From 31 bits up (every valid layout has at least 39), the fixed
	// widths differ, so a string's length names its form.
	for w := 31; w <= 63; w++ {
		a, b, c := FormatWidth(FormatBase32, w), FormatWidth(FormatBase62, w), FormatWidth(FormatHex, w)
		if a == b || b == c || a == c {
			t.Errorf("width %d: base32 %d, base62 %d, hex %d characters: want three different lengths", w, a, b, c)
		}
	}
}

func TestDecodeIDLeniency(t *testing.T) {
	tests := []struct {
		in    string
		f     Format
		width int
		want  ID
		err   string
	}{
		{"0000000000001", FormatBase32, 63, 1, ""},
		{"000000000000i", FormatBase32, 63, 1, ""}, // I and L read as 1
		{"000000000000L", FormatBase32, 63, 1, ""},
		{"00000000000o1", FormatBase32, 63, 1, ""},  // O read as 0
		{"000000000000z", FormatBase32, 63, 31, ""}, // lower case
		{"000000000000Z", FormatAny, 63, 31, ""},
		{"000000000000000F", FormatHex, 63, 15, ""},
		{"0000000000000001", FormatAny, 63, 1, ""}, // digits only: decimal
		{"000000000000U", FormatBase32, 63, 0, "not a base32 digit"},
		{"0000000000z", FormatAny, 63, 61, ""},
		{"000000000Z", FormatAny, 63, 0, "none of decimal"},
		{"0000000000001", FormatBase62, 63, 0, "characters long"},
		{"1", FormatHex, 63, 0, "characters long"},
		{"9223372036854775807", FormatAny, 63, 1<<63 - 1, ""},
		{"9007199254740992", FormatAny, 53, 0, "above"},
		{"0F", FormatAny, 6, 0, "could be base32 or base62"},
	}
	for _, tt := range tests {
		got, err := DecodeID(tt.in, tt.f, tt.width)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("DecodeID(%q, %s, %d): got %d, %v, want %d", tt.in, tt.f, tt.width, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrInvalidID)):
			t.Errorf("DecodeID(%q, %s, %d): got %d, %v, want ErrInvalidID containing %q", tt.in, tt.f, tt.width, got, err, tt.err)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for _, name := range strings.Split(FormatNames, ", ") {
		f, err := ParseFormat(name)
		if err != nil || f.String() != name {
			t.Errorf("ParseFormat(%q): got %v, %v, want the format of that name", name, f, err)
		}
	}
	if f, err := ParseFormat(""); err != nil || f != FormatAny {
		t.Errorf(`ParseFormat(""): got %v, %v, want FormatAny`, f, err)
	}
	for _, bad := range []string{"Base32", "b32", "base64", "decimal "} {
		if _, err := ParseFormat(bad); !errors.Is(err, ErrInvalidFormat) {
			t.Errorf("ParseFormat(%q): got %v, want ErrInvalidFormat", bad, err)
		}
	}
}

func TestAppendEncodedAllocates(t *testing.T) {
	buf := make([]byte, 0, 64)
	for _, f := range fixedFormats {
		if n := testing.AllocsPerRun(100, func() { buf = AppendEncoded(buf[:0], 1<<62+12345, f, 63) }); n != 0 {
			t.Errorf("AppendEncoded(%s): got %v allocations, want 0", f, n)
		}
	}
}

// FuzzDecodeID: whatever the input, DecodeID either refuses it with
// ErrInvalidID or returns an ID of the width that encodes back to a string
// that decodes to the same ID, in the fixed width.
func FuzzDecodeID(f *testing.F) {
	for _, s := range []string{"", "0", "01ARZ3NDEKTSV", "7ZZZZZZZZZZZZ", "8000000000000", "zzzzzzzzzzz", "AzL8n0Y58m7", "7fffffffffffffff", "9223372036854775807", "-1", "0x1f", "ilo", "\xff"} {
		for _, w := range []uint8{63, 53, 41} {
			for fm := range uint8(5) {
				f.Add(s, fm, w)
			}
		}
	}
	f.Fuzz(func(t *testing.T, s string, fm, w uint8) {
		format := Format(fm % 5)
		width := int(w%63) + 1
		id, err := DecodeID(s, format, width)
		if err != nil {
			if !errors.Is(err, ErrInvalidID) {
				t.Fatalf("DecodeID(%q, %s, %d): got %v, want ErrInvalidID", s, format, width, err)
			}
			return
		}
		if id < 0 || uint64(id) >= uint64(1)<<width {
			t.Fatalf("DecodeID(%q, %s, %d): got %d outside the width", s, format, width, id)
		}
		for _, out := range []Format{FormatDecimal, FormatBase32, FormatBase62, FormatHex} {
			enc := EncodeID(id, out, width)
			if fw := FormatWidth(out, width); fw > 0 && len(enc) != fw {
				t.Fatalf("EncodeID(%d, %s, %d) = %q: want %d characters", id, out, width, enc, fw)
			}
			if back, err := DecodeID(enc, out, width); err != nil || back != id {
				t.Fatalf("DecodeID(EncodeID(%d, %s, %d) = %q): got %d, %v", id, out, width, enc, back, err)
			}
		}
	})
}

// FuzzParseFormat: a name either is one of the formats, and then its
// String, or is refused with ErrInvalidFormat.
func FuzzParseFormat(f *testing.F) {
	for _, s := range []string{"", "decimal", "base32", "base62", "hex", "HEX", "base"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseFormat(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidFormat) {
				t.Fatalf("ParseFormat(%q): got %v, want ErrInvalidFormat", s, err)
			}
			return
		}
		if got.String() != s {
			t.Fatalf("ParseFormat(%q).String() = %q", s, got.String())
		}
	})
}
