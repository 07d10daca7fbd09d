package rpcapi_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/internal/stores"
	"github.com/idgen-project/idgen/internal/testserver"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
)

// failingFetches is a store whose range fetches fail as a database that
// cannot be reached does, with words of its own in the error.
type failingFetches struct{ stores.Store }

var errStoreWords = errors.New("injected-store-words: dial tcp 10.9.8.7:5432: connection refused")

func (failingFetches) FetchSegment(context.Context, string, int64) (allocator.Segment, error) {
	return allocator.Segment{}, errStoreWords
}

// TestErrorsInCallersWords: the refusals of a namespace (unknown,
// exhausted, not servable now) say what failed in idgen's words, naming
// the namespace, and never show the store's own ("sqlite: get namespace
// …", a connection error), over NextIds and StreamIds alike.
func TestErrorsInCallersWords(t *testing.T) {
	logs := &testserver.LogBuffer{}
	srv := testserver.MustStart(t, testserver.Options{Store: failingFetches{testserver.OpenStore(t, "sqlite")},
		Segments: allocator.SegmentSettings{RetryMin: 10e6, RetryMax: 100e6},
		Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx := t.Context()
	for _, ns := range []allocator.Namespace{
		// Its counter at the end: a draw is refused before any fetch.
		{Name: "top", MaxID: math.MaxInt64, Step: 2, MinStep: 2, MaxStep: 2},
		// Its fetches fail: no fallback, so it cannot be served.
		{Name: "down", Step: 10, MinStep: 10, MaxStep: 10},
	} {
		ns.Mode, ns.Fallback = allocator.ModeBuffered, allocator.FallbackNone
		if _, err := srv.Store().CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	conn := dial(t, srv.Addr().String())
	for _, tc := range []struct {
		namespace string
		code      codes.Code
		problem   idgen.Code
		retry     bool
		want      string
	}{
		{"nope", codes.NotFound, idgen.NotFound, false, `namespace "nope" does not exist`},
		{"top", codes.FailedPrecondition, idgen.NamespaceExhausted, false, `namespace "top" is exhausted: fewer IDs are left below its limit than were asked for`},
		{"down", codes.Unavailable, idgen.Unavailable, true, `namespace "down" cannot be served now: retry later or call another node`},
	} {
		t.Run(tc.namespace, func(t *testing.T) {
			err := conn.Invoke(ctx, procNextIds, &idgenv1.NextIdsRequest{Namespace: tc.namespace, Count: 1}, new(idgenv1.NextIdsResponse))
			_, serr := streamAll(ctx, conn, &idgenv1.StreamIdsRequest{Namespace: tc.namespace, BatchSize: 1, Total: 1})
			for what, err := range map[string]error{"NextIds": err, "StreamIds": serr} {
				checkStatus(t, err, tc.code, tc.problem, tc.retry)
				msg := status.Convert(err).Message()
				if msg != tc.want {
					t.Errorf("%s %s: got message %q, want %q", what, tc.namespace, msg, tc.want)
				}
				for _, word := range []string{"sqlite", "injected-store-words", "10.9.8.7"} {
					if strings.Contains(msg, word) {
						t.Errorf("%s %s: message %q shows the store's words (%q)", what, tc.namespace, msg, word)
					}
				}
			}
		})
	}
	// The store's words are in the log, for the operator.
	if want := `msg="grpc call refused" code=not_found request_id=`; !strings.Contains(logs.String(), want) ||
		!strings.Contains(logs.String(), `sqlite: get namespace \"nope\"`) {
		t.Errorf("log: want %s with the store's error, got\n%s", want, logs.String())
	}
}
