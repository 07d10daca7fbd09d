package httpapi_test

import (
	"slices"
	"testing"
	"time"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/snowflake"
)

type composeJSON struct {
	Time        string `json:"time"`
	TimestampMS int64  `json:"timestamp_ms"`
	First       string `json:"first"`
	Last        string `json:"last"`
	Format      string `json:"format"`
}

// formsEnv is a node on layout (a preset's name) whose answers take the
// forms of formats by default.
func formsEnv(t *testing.T, preset string, formats map[string]snowflake.Format) (*env, snowflake.Layout) {
	t.Helper()
	l, ok := snowflake.PresetLayout(preset)
	if !ok {
		t.Fatalf("no preset %q", preset)
	}
	e := newEnv(t, envOptions{token: testToken, layout: l})
	if formats != nil {
		cfg := e.config()
		cfg.Service = e.service(idgen.Settings{Formats: formats})
		e.h = e.handler(cfg)
	}
	return e, l
}

// TestIDsJS53: a node on the js53 preset hands out IDs no larger than
// 2^53 - 1, in every form, each form sorting as the numbers do.
func TestIDsJS53(t *testing.T) {
	e, _ := formsEnv(t, snowflake.PresetJS53, nil)
	for _, format := range []string{"", "decimal", "base32", "base62", "hex"} {
		target := "/ids?count=1000"
		if format != "" {
			target += "&format=" + format
		}
		r := getOK[idsResponse](t, e, target)
		if len(r.IDs) != 1000 {
			t.Fatalf("GET %s: got %d IDs, want 1000", target, len(r.IDs))
		}
		if r.Format != format {
			t.Errorf("GET %s: got format %q, want %q", target, r.Format, format)
		}
		f, _ := snowflake.ParseFormat(format)
		nums := make([]int64, len(r.IDs))
		for i, s := range r.IDs {
			id, err := snowflake.DecodeID(s, f, 53)
			if err != nil {
				t.Fatalf("GET %s: ID %q: %v", target, s, err)
			}
			if id > 1<<53-1 {
				t.Fatalf("GET %s: ID %d above 2^53 - 1", target, id)
			}
			if w := snowflake.FormatWidth(f, 53); w > 0 && len(s) != w {
				t.Fatalf("GET %s: ID %q: want %d characters", target, s, w)
			}
			nums[i] = int64(id)
		}
		if !slices.IsSorted(nums) || (f != snowflake.FormatAny && f != snowflake.FormatDecimal && !slices.IsSorted(r.IDs)) {
			t.Errorf("GET %s: IDs not increasing, as numbers or as strings", target)
		}
	}
}

func TestIDsFormatErrors(t *testing.T) {
	e, _ := formsEnv(t, snowflake.PresetClassic, nil)
	for _, target := range []string{
		"/ids?format=base64",
		"/ids?format=BASE32",
		"/ids?format=hex&format=hex",
		"/ids/1?format=base64",
		"/ids/1?form=hex",
		"/ids/zzzzzzzzzzz?format=base32",
		"/ids/9223372036854775808",
		"/ids/compose",
		"/ids/compose?time=yesterday",
		"/ids/compose?time=2025-12-31T23:59:59.999Z",
		"/ids/compose?time=2026-01-01T00:00:00Z&format=base64",
		"/ids/compose?time=2026-01-01T00:00:00Z&at=1",
	} {
		rec := e.do("GET", target, "")
		wantStatus(t, rec, 400)
	}
}

func TestNamespaceFormatSetting(t *testing.T) {
	e, _ := formsEnv(t, snowflake.PresetClassic, map[string]snowflake.Format{"": snowflake.FormatBase32, "orders": snowflake.FormatHex})
	wantStatus(t, e.admin("POST", "/admin/namespaces", `{"name":"orders","start":"1000","step":50}`), 201)
	r := getOK[idsResponse](t, e, "/ids?namespace=orders&count=3")
	if want := []string{"00000000000003e8", "00000000000003e9", "00000000000003ea"}; !slices.Equal(r.IDs, want) || r.Format != "hex" {
		t.Errorf("orders in hex: got %v (%q), want %v", r.IDs, r.Format, want)
	}
	if len(r.Ranges) != 1 || r.Ranges[0].First != "00000000000003e8" || r.Ranges[0].Last != "00000000000003ea" {
		t.Errorf("orders' ranges in hex: got %+v", r.Ranges)
	}
	r = getOK[idsResponse](t, e, "/ids?namespace=orders&count=1&format=decimal")
	if r.IDs[0] != "1003" || r.Format != "decimal" {
		t.Errorf("orders asked in decimal: got %v (%q), want [1003]", r.IDs, r.Format)
	}
	r = getOK[idsResponse](t, e, "/ids?count=2")
	if len(r.IDs[0]) != 13 || r.Format != "base32" {
		t.Errorf("Snowflake IDs by the node's setting: got %v (%q), want base32", r.IDs, r.Format)
	}
	x := getOK[parseJSON](t, e, "/ids/"+r.IDs[1]+"?format=base32")
	if x.Forms.Base32 != r.IDs[1] || x.ID != x.Forms.Decimal {
		t.Errorf("GET /ids/%s: got %+v, want its base32 form back and the decimal ID", r.IDs[1], x)
	}
}

// TestComposeAgreesWithParse: the bounds of a millisecond decompose to that
// millisecond, with the smallest and the largest other parts.
func TestComposeAgreesWithParse(t *testing.T) {
	for _, preset := range []string{snowflake.PresetClassic, snowflake.PresetJS53} {
		e, l := formsEnv(t, preset, nil)
		at := time.Date(2026, 11, 27, 12, 34, 56, 789_500_000, time.UTC)
		for _, format := range []string{"", "base62"} {
			target := "/ids/compose?time=" + at.Format(time.RFC3339Nano)
			if format != "" {
				target += "&format=" + format
			}
			c := getOK[composeJSON](t, e, target)
			if c.Time != "2026-11-27T12:34:56.789Z" || c.TimestampMS != at.UnixMilli() || c.Format != format {
				t.Errorf("%s: GET %s: got %+v, want the millisecond", preset, target, c)
			}
			first, last := getOK[parseJSON](t, e, "/ids/"+c.First), getOK[parseJSON](t, e, "/ids/"+c.Last)
			if first.TimestampMS != c.TimestampMS || first.Datacenter != 0 || first.Worker != 0 || first.Sequence != 0 {
				t.Errorf("%s: first %s: got %+v, want the millisecond with zero parts", preset, c.First, first)
			}
			if last.TimestampMS != c.TimestampMS || last.Datacenter != l.MaxDatacenter() || last.Worker != l.MaxWorker() || last.Sequence != l.MaxSequence() {
				t.Errorf("%s: last %s: got %+v, want the millisecond with the largest parts", preset, c.Last, last)
			}
		}
	}
}
