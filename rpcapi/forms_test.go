package rpcapi_test

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/testserver"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/snowflake"
)

// TestFormsAndCompose: NextIds and StreamIds write the forms asked for or
// set for the namespace, Parse reads any form, and Compose's bounds parse
// to their millisecond, on a node of the js53 layout.
func TestFormsAndCompose(t *testing.T) {
	js53, _ := snowflake.PresetLayout(snowflake.PresetJS53)
	srv := testserver.MustStart(t, testserver.Options{
		Keeper:  allocator.KeeperSettings{Layout: js53},
		Formats: map[string]snowflake.Format{"orders": snowflake.FormatBase62},
	})
	step := int64(10)
	srv.CreateNamespace(t, allocator.NamespaceSpec{Name: "orders", Step: &step})
	conn := dial(t, srv.Addr().String())
	ctx := t.Context()

	var resp idgenv1.NextIdsResponse
	if err := conn.Invoke(ctx, procNextIds, &idgenv1.NextIdsRequest{Count: 1000}, &resp); err != nil {
		t.Fatalf("NextIds: %v", err)
	}
	if len(resp.GetIdTexts()) != 0 || resp.GetFormat() != idgenv1.IdFormat_ID_FORMAT_UNSPECIFIED {
		t.Errorf("NextIds without a format: got texts %v format %v, want none", resp.GetIdTexts()[:min(3, len(resp.GetIdTexts()))], resp.GetFormat())
	}
	for _, id := range resp.GetIds() {
		if id > 1<<53-1 {
			t.Fatalf("NextIds on js53: ID %d above 2^53 - 1", id)
		}
	}

	if err := conn.Invoke(ctx, procNextIds, &idgenv1.NextIdsRequest{Count: 50, Format: idgenv1.IdFormat_ID_FORMAT_BASE32}, &resp); err != nil {
		t.Fatalf("NextIds base32: %v", err)
	}
	if len(resp.GetIdTexts()) != 50 || resp.GetFormat() != idgenv1.IdFormat_ID_FORMAT_BASE32 || !slices.IsSorted(resp.GetIdTexts()) {
		t.Fatalf("NextIds base32: got %d texts in %v, want 50 increasing", len(resp.GetIdTexts()), resp.GetFormat())
	}
	for i, text := range resp.GetIdTexts() {
		var parsed idgenv1.ParseResponse
		if err := conn.Invoke(ctx, procParse, &idgenv1.ParseRequest{Text: text}, &parsed); err != nil {
			t.Fatalf("Parse(%q): %v", text, err)
		}
		if parsed.GetId() != resp.GetIds()[i] || parsed.GetForms().GetBase32() != text || len(text) != 11 {
			t.Fatalf("Parse(%q): got ID %d forms %v, want %d", text, parsed.GetId(), parsed.GetForms(), resp.GetIds()[i])
		}
	}

	if err := conn.Invoke(ctx, procNextIds, &idgenv1.NextIdsRequest{Namespace: "orders", Count: 3}, &resp); err != nil {
		t.Fatalf("NextIds orders: %v", err)
	}
	if want := []string{"00000000001", "00000000002", "00000000003"}; !slices.Equal(resp.GetIdTexts(), want) || resp.GetFormat() != idgenv1.IdFormat_ID_FORMAT_BASE62 {
		t.Errorf("NextIds orders by its setting: got %v in %v, want %v in base62", resp.GetIdTexts(), resp.GetFormat(), want)
	}

	msgs, err := streamAll(ctx, conn, &idgenv1.StreamIdsRequest{Namespace: "orders", BatchSize: 4, Total: 4, Format: idgenv1.IdFormat_ID_FORMAT_HEX})
	if err != nil {
		t.Fatalf("StreamIds hex: %v", err)
	}
	if r := msgs[0].GetRanges()[0]; r.GetFirstText() != "0000000000000004" || r.GetLastText() != "0000000000000007" {
		t.Errorf("StreamIds hex: got range %v, want 4..7 in hex", r)
	}

	at := time.Date(2030, 5, 6, 7, 8, 9, 10_999_999, time.UTC)
	var c idgenv1.ComposeResponse
	if err := conn.Invoke(ctx, procCompose, &idgenv1.ComposeRequest{Time: timestamppb.New(at), Format: idgenv1.IdFormat_ID_FORMAT_HEX}, &c); err != nil {
		t.Fatalf("Compose: %v", err)
	}
	if !c.GetTime().AsTime().Equal(at.Truncate(time.Millisecond)) || c.GetLast()-c.GetFirst() != 1<<12-1 || len(c.GetFirstText()) != 14 {
		t.Errorf("Compose(%v): got %v, want the millisecond's 4096 IDs, hex of 14 characters", at, &c)
	}
	for _, bound := range []struct {
		text string
		seq  int32
	}{{c.GetFirstText(), 0}, {c.GetLastText(), 127}} {
		var parsed idgenv1.ParseResponse
		if err := conn.Invoke(ctx, procParse, &idgenv1.ParseRequest{Text: bound.text, Format: idgenv1.IdFormat_ID_FORMAT_HEX}, &parsed); err != nil {
			t.Fatalf("Parse(%q): %v", bound.text, err)
		}
		if parsed.GetTimestampMs() != at.UnixMilli() || parsed.GetSequence() != bound.seq {
			t.Errorf("Parse(%q): got %v, want time %d sequence %d", bound.text, &parsed, at.UnixMilli(), bound.seq)
		}
	}
}
