package idgen_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// declaredCodes returns the Code constants errors.go declares, by value.
func declaredCodes(t *testing.T) map[idgen.Code]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[idgen.Code]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			v, err := strconv.Unquote(vs.Values[0].(*ast.BasicLit).Value)
			if err != nil {
				t.Fatal(err)
			}
			out[idgen.Code(v)] = vs.Names[0].Name
		}
	}
	return out
}

// TestCodesTable walks the one table of codes both ways: every Code
// constant has one row, every row is a declared constant, and each row
// says what every transport needs (a status, a gRPC code, a title).
func TestCodesTable(t *testing.T) {
	declared := declaredCodes(t)
	rows := map[idgen.Code]int{}
	for _, e := range idgen.Codes() {
		rows[e.Code]++
		if _, ok := declared[e.Code]; !ok {
			t.Errorf("row %q is no declared Code constant", e.Code)
		}
		if e.HTTPStatus < 400 || e.HTTPStatus > 599 || http.StatusText(e.HTTPStatus) == "" {
			t.Errorf("code %s: HTTP status %d is no error status", e.Code, e.HTTPStatus)
		}
		if e.GRPC == 0 || e.GRPC.String() == "" || strings.HasPrefix(e.GRPC.String(), "code_") {
			t.Errorf("code %s: gRPC code %v is no error code", e.Code, e.GRPC)
		}
		if e.Title == "" {
			t.Errorf("code %s: no title", e.Code)
		}
		if e.RetryLater != (e.HTTPStatus == http.StatusServiceUnavailable || e.HTTPStatus == http.StatusTooManyRequests ||
			e.Code == idgen.NoWorkerAvailable || e.Code == idgen.StorageFull) {
			t.Errorf("code %s: retry later %v with status %d: want it exactly for 503, 429, no_worker_available and storage_full", e.Code, e.RetryLater, e.HTTPStatus)
		}
		if got := idgen.Info(e.Code); got != e {
			t.Errorf("Info(%s) = %+v, want its row %+v", e.Code, got, e)
		}
	}
	for code, name := range declared {
		if rows[code] != 1 {
			t.Errorf("constant %s (%q) has %d rows, want 1", name, code, rows[code])
		}
	}
	if got := idgen.Info("no-such-code"); got.Code != idgen.Internal || got.GRPC != connect.CodeInternal {
		t.Errorf("Info of an unknown code: %+v, want Internal's row", got)
	}
}

// storageFullDetail is the detail of a StorageFull answer: it names the
// alarm and what the operator does.
const storageFullDetail = "the database is out of space and refuses every write (etcd: the NOSPACE alarm is raised), " +
	"so no node can renew its lease or fetch a range; an operator must free space " +
	"(compact, defragment, disarm the alarm: docs/operations.md), then the nodes serve again"

// TestErrorOf: the domain's errors get their codes and details in idgen's
// words (a namespace's named), the store's words stay in Err only, and an
// unknown error is Internal.
func TestErrorOf(t *testing.T) {
	store := fmt.Errorf("sqlite: get namespace %q: secret-host:5432: %w", "orders", allocator.ErrNamespaceNotFound)
	for _, tc := range []struct {
		name       string
		err        error
		ns         string
		code       idgen.Code
		detail     string
		retryAfter time.Duration
	}{
		{"unknown namespace", store, "orders", idgen.NotFound, `namespace "orders" does not exist`, 0},
		{"exhausted", fmt.Errorf("x: %w", allocator.ErrNamespaceExhausted), "orders", idgen.NamespaceExhausted,
			`namespace "orders" is exhausted: fewer IDs are left below its limit than were asked for`, 0},
		{"exists", fmt.Errorf("x: %w", allocator.ErrNamespaceExists), "", idgen.Conflict, "the namespace exists already", 0},
		{"namespace unavailable", fmt.Errorf("db down: %w", allocator.ErrUnavailable), "orders", idgen.Unavailable,
			`namespace "orders" cannot be served now: retry later or call another node`, time.Second},
		{"no lease", fmt.Errorf("%w: no worker lease held", allocator.ErrUnavailable), "", idgen.Unavailable, "unavailable: no worker lease held", time.Second},
		{"store full, snowflake", fmt.Errorf("%w: no worker lease held (%w)", allocator.ErrUnavailable,
			fmt.Errorf("etcd: claim at secret-host:2379: %w", allocator.ErrStoreFull)), "", idgen.StorageFull, storageFullDetail, 30 * time.Second},
		{"store full, namespace", fmt.Errorf("%w: namespace %q: %w", allocator.ErrUnavailable, "orders", allocator.ErrStoreFull), "orders",
			idgen.StorageFull, `namespace "orders" cannot be served: ` + storageFullDetail, 30 * time.Second},
		{"no worker", fmt.Errorf("x: %w", allocator.ErrNoWorkerAvailable), "", idgen.NoWorkerAvailable, "every worker ID of the pool is held", time.Second},
		{"lost", fmt.Errorf("x: %w", allocator.ErrLeaseLost), "", idgen.LeaseLost, "the lease is not held at that fencing version", 0},
		{"invalid release", fmt.Errorf("postgres: release of worker 0/1: %w: 9 is above the committed ceiling 5", allocator.ErrInvalidRelease),
			"", idgen.InvalidRelease, allocator.ErrInvalidRelease.Error() + ": 9 is above the committed ceiling 5; the lease is unchanged", 0},
		{"invalid ID", fmt.Errorf("%w: x", snowflake.ErrInvalidID), "", idgen.Invalid, "snowflake: invalid ID: x", 0},
		{"unknown", errors.New("boom at secret-host"), "", idgen.Internal, "internal error; see the server log", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := idgen.ErrorOf(tc.err, tc.ns)
			if e.Code != tc.code || e.Detail != tc.detail || e.Retry() != tc.retryAfter || !errors.Is(e, tc.err) {
				t.Errorf("got %s %q retry %v, want %s %q retry %v, wrapping the cause", e.Code, e.Detail, e.Retry(), tc.code, tc.detail, tc.retryAfter)
			}
			if strings.Contains(e.Detail, "secret-host") {
				t.Errorf("detail %q shows the store's words", e.Detail)
			}
		})
	}
	own := &idgen.Error{Code: idgen.TooMany, Detail: "slow down"}
	if got := idgen.ErrorOf(fmt.Errorf("wrapped: %w", own), ""); got != own {
		t.Errorf("ErrorOf of a wrapped *Error: got %v, want it as it is", got)
	}
}

// TestStoreError: the one rule every store-backed call answers by (the
// admin API, the lease API, sequences over HTTP and gRPC).
func TestStoreError(t *testing.T) {
	down := errors.New("dial tcp 127.0.0.1:5432: connection refused")
	tests := []struct {
		name  string
		err   error
		code  idgen.Code
		retry time.Duration
	}{
		{"store down", down, idgen.Unavailable, time.Second},
		{"caller gone", fmt.Errorf("query: %w", context.Canceled), idgen.Internal, 0},
		{"domain error", allocator.ErrNamespaceNotFound, idgen.NotFound, 0},
		{"sequence call, store down", idgen.SequenceError(down, "inv"), idgen.Unavailable, time.Second},
	}
	for _, tt := range tests {
		got := idgen.StoreError(tt.err, "")
		if got.Code != tt.code || got.RetryAfter != tt.retry {
			t.Errorf("%s: got %s retry %v, want %s retry %v", tt.name, got.Code, got.RetryAfter, tt.code, tt.retry)
		}
	}
}
