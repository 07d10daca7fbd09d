package rpcapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/internal/testserver"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
)

// seqCall returns req with "Authorization: Bearer secret".
func seqCall[T any](msg *T, secret string) *connect.Request[T] {
	req := connect.NewRequest(msg)
	req.Header().Set("Authorization", "Bearer "+secret)
	return req
}

func wantCode(t *testing.T, what string, err error, want connect.Code) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != want {
		t.Errorf("%s: got %v, want %v", what, err, want)
	}
}

// TestSequenceService runs SequenceService over the Connect protocol: the
// same rules as /v1/sequences (scopes, the reserving caller, the count cap).
func TestSequenceService(t *testing.T) {
	const adminSecret, otherSecret = "seq-admin-secret-0123456789abcdef", "seq-other-secret-0123456789abcdef"
	tokens := fmt.Sprintf("%sseq-admin admin %s\nother-caller ids %s\n", tokensFile(), idgen.HashSecret(adminSecret), idgen.HashSecret(otherSecret))
	srv := testserver.MustStart(t, testserver.Options{Tokens: tokens})
	c := idgenv1connect.NewSequenceServiceClient(http.DefaultClient, srv.URL)
	ctx := t.Context()

	_, err := c.CreateSequence(ctx, seqCall(&idgenv1.CreateSequenceRequest{Name: "inv", Format: "INV-{yyyy}-{seq:06}", ResetPeriod: "yearly", TimeZone: "Europe/Berlin"}, adminSecret))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateSequence(ctx, seqCall(&idgenv1.CreateSequenceRequest{Name: "bad", Format: "INV-{yyyy}"}, adminSecret))
	wantCode(t, "create without a counter", err, connect.CodeInvalidArgument)
	_, err = c.CreateSequence(ctx, seqCall(&idgenv1.CreateSequenceRequest{Name: "x", Format: "{seq}"}, secretIDs))
	wantCode(t, "create with the ids scope", err, connect.CodePermissionDenied)

	res, err := c.ReserveNumbers(ctx, seqCall(&idgenv1.ReserveNumbersRequest{Sequence: "inv", Count: 2}, secretIDs))
	if err != nil {
		t.Fatal(err)
	}
	r := res.Msg.GetReservation()
	if len(r.GetNumbers()) != 2 || r.GetNumbers()[0] != 1 || r.GetCaller() != "ids-caller" || r.GetFormatted()[1] != "INV-"+r.GetPeriod()+"-000002" {
		t.Fatalf("reservation: got %v", r)
	}
	_, err = c.ReserveNumbers(ctx, seqCall(&idgenv1.ReserveNumbersRequest{Sequence: "inv", Count: 1001}, secretIDs))
	wantCode(t, "count above the cap", err, connect.CodeInvalidArgument)

	_, err = c.ConfirmReservation(ctx, seqCall(&idgenv1.ConfirmReservationRequest{Sequence: "inv", ReservationId: r.GetReservationId()}, otherSecret))
	wantCode(t, "confirm by another caller", err, connect.CodePermissionDenied)
	if _, err := c.ConfirmReservation(ctx, seqCall(&idgenv1.ConfirmReservationRequest{Sequence: "inv", ReservationId: r.GetReservationId()}, secretIDs)); err != nil {
		t.Fatalf("confirm by its caller: %v", err)
	}
	_, err = c.VoidReservation(ctx, seqCall(&idgenv1.VoidReservationRequest{Sequence: "inv", ReservationId: r.GetReservationId()}, secretIDs))
	wantCode(t, "void after confirm", err, connect.CodeAlreadyExists)

	led, err := c.GetLedger(ctx, seqCall(&idgenv1.GetLedgerRequest{Sequence: "inv"}, adminSecret))
	if err != nil {
		t.Fatal(err)
	}
	if es := led.Msg.GetEntries(); len(es) != 2 || es[0].GetState() != "confirmed" || es[1].GetNumber() != 2 || led.Msg.GetMore() {
		t.Errorf("ledger: got %v", led.Msg)
	}
	_, err = c.GetLedger(ctx, seqCall(&idgenv1.GetLedgerRequest{Sequence: "inv"}, secretIDs))
	wantCode(t, "ledger with the ids scope", err, connect.CodePermissionDenied)

	list, err := c.ListSequences(ctx, seqCall(&idgenv1.ListSequencesRequest{}, adminSecret))
	if err != nil || len(list.Msg.GetSequences()) != 1 || list.Msg.GetSequences()[0].GetStatus().GetLastNumber() != 2 {
		t.Errorf("list: got %v, %v; want inv with last number 2", list, err)
	}
}

// TestSequenceServiceNative calls SequenceService with grpc-go, whose
// connections the listener hands to grpc-go's own server: the same scopes
// and the same reserving-caller rule as over Connect.
func TestSequenceServiceNative(t *testing.T) {
	const adminSecret, otherSecret = "seq-admin-secret-0123456789abcdef", "seq-other-secret-0123456789abcdef"
	tokens := fmt.Sprintf("%sseq-admin admin %s\nother-caller ids %s\n", tokensFile(), idgen.HashSecret(adminSecret), idgen.HashSecret(otherSecret))
	srv := testserver.MustStart(t, testserver.Options{Tokens: tokens})
	conn, err := grpc.NewClient(strings.TrimPrefix(srv.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := idgenv1.NewSequenceServiceClient(conn)
	as := func(secret string) context.Context {
		return metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+secret)
	}
	wantStatus := func(what string, err error, want codes.Code) {
		t.Helper()
		if got := status.Code(err); got != want {
			t.Errorf("%s: got %v (%v), want %v", what, got, err, want)
		}
	}

	_, err = c.CreateSequence(as(adminSecret), &idgenv1.CreateSequenceRequest{Name: "inv", Format: "INV-{yyyy}-{seq:06}", ResetPeriod: "yearly", TimeZone: "Europe/Berlin"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateSequence(as(secretIDs), &idgenv1.CreateSequenceRequest{Name: "x", Format: "{seq}"})
	wantStatus("create with the ids scope", err, codes.PermissionDenied)
	_, err = c.ReserveNumbers(t.Context(), &idgenv1.ReserveNumbersRequest{Sequence: "inv", Count: 1})
	wantStatus("reserve without a token", err, codes.Unauthenticated)
	res, err := c.ReserveNumbers(as(secretIDs), &idgenv1.ReserveNumbersRequest{Sequence: "inv", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	r := res.GetReservation()
	if got := r.GetNumbers(); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("reserve: got numbers %v, want [1 2]", got)
	}
	_, err = c.VoidReservation(as(otherSecret), &idgenv1.VoidReservationRequest{Sequence: "inv", ReservationId: r.GetReservationId()})
	wantStatus("void by another caller", err, codes.PermissionDenied)
	if _, err := c.ConfirmReservation(as(secretIDs), &idgenv1.ConfirmReservationRequest{Sequence: "inv", ReservationId: r.GetReservationId()}); err != nil {
		t.Fatalf("confirm by its caller: %v", err)
	}
	led, err := c.GetLedger(as(adminSecret), &idgenv1.GetLedgerRequest{Sequence: "inv"})
	if err != nil || len(led.GetEntries()) != 2 || led.GetEntries()[0].GetState() != "confirmed" {
		t.Errorf("ledger: got %v, %v; want two confirmed entries", led, err)
	}
}
