package idgen_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// layoutOnly is a Snowflakes that serves only its layout.
type layoutOnly struct{ l snowflake.Layout }

func (f layoutOnly) NextSnowflakesFenced(dst []int64, n int) ([]int64, allocator.LeaseToken, error) {
	return dst, allocator.LeaseToken{}, errors.New("not drawn in this test")
}
func (f layoutOnly) Layout() snowflake.Layout { return f.l }

type noSegments struct{}

func (noSegments) Draw(context.Context, string, int, *allocator.Batch) error {
	return errors.New("not drawn in this test")
}

func formsService(t *testing.T, preset string, formats map[string]snowflake.Format) *idgen.Service {
	t.Helper()
	l, ok := snowflake.PresetLayout(preset)
	if !ok {
		t.Fatalf("no preset %q", preset)
	}
	svc, err := idgen.NewService(layoutOnly{l}, noSegments{}, idgen.Settings{Formats: formats})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func TestEncoding(t *testing.T) {
	svc := formsService(t, snowflake.PresetJS53, map[string]snowflake.Format{"": snowflake.FormatBase32, "orders": snowflake.FormatHex})
	tests := []struct {
		req  idgen.DrawRequest
		want idgen.Encoding
		text string // of ID 1
	}{
		{idgen.DrawRequest{}, idgen.Encoding{Format: snowflake.FormatBase32, Width: 53}, "00000000001"},
		{idgen.DrawRequest{Format: snowflake.FormatBase62}, idgen.Encoding{Format: snowflake.FormatBase62, Width: 53}, "000000001"},
		{idgen.DrawRequest{Namespace: "orders"}, idgen.Encoding{Format: snowflake.FormatHex, Width: 63}, "0000000000000001"},
		{idgen.DrawRequest{Namespace: "invoices"}, idgen.Encoding{Width: 63}, "1"},
		{idgen.DrawRequest{Namespace: "orders", Format: snowflake.FormatDecimal}, idgen.Encoding{Format: snowflake.FormatDecimal, Width: 63}, "1"},
	}
	for _, tt := range tests {
		got := svc.Encoding(tt.req)
		if got != tt.want {
			t.Errorf("Encoding(%+v): got %+v, want %+v", tt.req, got, tt.want)
		}
		if s := got.String(1); s != tt.text {
			t.Errorf("Encoding(%+v).String(1): got %q, want %q", tt.req, s, tt.text)
		}
		if got.Named() != (tt.want.Format != snowflake.FormatAny) {
			t.Errorf("Encoding(%+v).Named(): got %v", tt.req, got.Named())
		}
	}
}

func TestNewServiceFormats(t *testing.T) {
	for _, bad := range []map[string]snowflake.Format{
		{"Orders": snowflake.FormatHex},
		{"": snowflake.FormatAny},
		{"orders": snowflake.Format(9)},
	} {
		if _, err := idgen.NewService(layoutOnly{snowflake.DefaultLayout()}, noSegments{}, idgen.Settings{Formats: bad}); err == nil {
			t.Errorf("NewService(Formats: %v): got no error, want one", bad)
		}
	}
}

func TestParseFormatIsInvalid(t *testing.T) {
	_, err := idgen.ParseFormat("base64")
	var e *idgen.Error
	if !errors.As(err, &e) || e.Code != idgen.Invalid || !strings.Contains(e.Detail, "decimal, base32, base62, hex") {
		t.Fatalf("ParseFormat(base64): got %v, want Invalid naming the formats", err)
	}
}

func TestDecodeText(t *testing.T) {
	svc := formsService(t, snowflake.PresetJS53, nil)
	l, _ := snowflake.PresetLayout(snowflake.PresetJS53)
	want, _ := l.Compose(snowflake.Parts{Timestamp: 123456789, Worker: 17, Sequence: 99})
	forms := svc.Forms(want)
	for _, text := range forms {
		id, p, err := svc.DecodeText(idgen.Caller{}, text, snowflake.FormatAny)
		if err != nil || id != want || p.Worker != 17 || p.Sequence != 99 {
			t.Errorf("DecodeText(%q): got %d %+v %v, want %d", text, id, p, err, want)
		}
	}
	for _, bad := range []string{"9007199254740992", "zzzzzzzzz", "0000000000000Z", ""} {
		_, _, err := svc.DecodeText(idgen.Caller{}, bad, snowflake.FormatAny)
		var e *idgen.Error
		if !errors.As(err, &e) || e.Code != idgen.Invalid || !strings.Contains(e.Detail, "53-bit") {
			t.Errorf("DecodeText(%q): got %v, want Invalid naming the 53-bit layout", bad, err)
		}
	}
	if _, err := svc.Decode(idgen.Caller{}, 1<<53); err == nil {
		t.Error("Decode(2^53) on a 53-bit layout: got no error, want Invalid")
	}
}

func TestCompose(t *testing.T) {
	svc := formsService(t, snowflake.PresetClassic, nil)
	at := time.Date(2026, 11, 27, 12, 34, 56, 789_999_999, time.UTC)
	got, err := svc.Compose(idgen.Caller{}, at)
	if err != nil {
		t.Fatal(err)
	}
	// 28557296789 ms after the epoch, << 22 (computed apart, in Python).
	if want := snowflake.ID(119777984151289856); got.First != want || got.Last != want+1<<22-1 {
		t.Errorf("Compose(%v): got %d..%d, want %d..%d", at, got.First, got.Last, want, want+1<<22-1)
	}
	if want := at.Truncate(time.Millisecond); !got.Time.Equal(want) {
		t.Errorf("Compose(%v).Time: got %v, want %v", at, got.Time, want)
	}
	_, err = svc.Compose(idgen.Caller{}, snowflake.DefaultEpoch.Add(-time.Millisecond))
	var e *idgen.Error
	if !errors.As(err, &e) || e.Code != idgen.Invalid {
		t.Errorf("Compose before the epoch: got %v, want Invalid", err)
	}
}
