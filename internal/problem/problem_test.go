package problem_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/idgen-project/idgen/internal/problem"
)

// httpapiCodes reads the problem codes the HTTP API declares: the string
// constants named code… in the non-test files of package httpapi. A
// constant defined as problem.X is this package's by construction; it is
// returned as "problem.X". The codes are unexported there, so the test reads
// the source rather than keep a second list of them here.
func httpapiCodes(t *testing.T) (literals, aliases []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "httpapi", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`^code[A-Z]`)
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !name.MatchString(id.Name) || i >= len(vs.Values) {
						continue
					}
					switch v := vs.Values[i].(type) {
					case *ast.BasicLit:
						s, err := strconv.Unquote(v.Value)
						if v.Kind != token.STRING || err != nil {
							t.Fatalf("%s: %s is not a string constant", fset.Position(id.Pos()), id.Name)
						}
						literals = append(literals, s)
					case *ast.SelectorExpr:
						if x, ok := v.X.(*ast.Ident); ok && x.Name == "problem" {
							aliases = append(aliases, "problem."+v.Sel.Name)
							continue
						}
						t.Fatalf("%s: %s: cannot tell which code it is", fset.Position(id.Pos()), id.Name)
					default:
						t.Fatalf("%s: %s: cannot tell which code it is", fset.Position(id.Pos()), id.Name)
					}
				}
			}
		}
	}
	if len(literals)+len(aliases) == 0 {
		t.Fatal("found no code… constants in httpapi: the HTTP API declares its problem codes elsewhere now; make this test read them there")
	}
	return literals, aliases
}

func TestTableCoversEveryCodeOfTheHTTPAPI(t *testing.T) {
	literals, aliases := httpapiCodes(t)
	for _, code := range literals {
		if _, ok := problem.Lookup(problem.Code(code)); !ok {
			t.Errorf("httpapi declares problem code %q: got no gRPC mapping for it, want a row in problem's table", code)
		}
	}
	t.Logf("httpapi declares %d codes as literals and %d as problem constants", len(literals), len(aliases))
}

func TestTableRows(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	seen := map[problem.Code]bool{}
	for _, e := range problem.Table() {
		if !valid.MatchString(string(e.Code)) {
			t.Errorf("code %q: want lower-case words joined by underscores", e.Code)
		}
		if seen[e.Code] {
			t.Errorf("code %q: got it twice in the table, want once", e.Code)
		}
		seen[e.Code] = true
		if e.GRPC == connect.CodeUnknown || e.GRPC == 0 {
			t.Errorf("code %q: got gRPC code %v, want a specific one", e.Code, e.GRPC)
		}
		// The codes a gRPC client retries on its own are exactly those
		// with a delay to wait.
		if retry := e.GRPC == connect.CodeUnavailable || e.GRPC == connect.CodeResourceExhausted; retry != e.RetryLater {
			t.Errorf("code %q (%v): got RetryLater %v, want %v", e.Code, e.GRPC, e.RetryLater, retry)
		}
	}
}

func TestConnectError(t *testing.T) {
	for _, tc := range []struct {
		code       problem.Code
		retryAfter time.Duration
		wantCode   connect.Code
		wantDelay  time.Duration // 0: no RetryInfo
		wantHeader string
	}{
		{problem.Invalid, 0, connect.CodeInvalidArgument, 0, ""},
		{problem.NotFound, 0, connect.CodeNotFound, 0, ""},
		{problem.Unauthorized, 0, connect.CodeUnauthenticated, 0, ""},
		{problem.Forbidden, 0, connect.CodePermissionDenied, 0, ""},
		{problem.NamespaceExhausted, 0, connect.CodeFailedPrecondition, 0, ""},
		{problem.LeaseLost, 0, connect.CodeAborted, 0, ""},
		{problem.InvalidRelease, 0, connect.CodeFailedPrecondition, 0, ""},
		{problem.Unavailable, 2500 * time.Millisecond, connect.CodeUnavailable, 2500 * time.Millisecond, "3"},
		{problem.Unavailable, 0, connect.CodeUnavailable, time.Second, "1"},
		{problem.Unavailable, 20 * time.Millisecond, connect.CodeUnavailable, 20 * time.Millisecond, "1"},
		{problem.TooMany, 3 * time.Second, connect.CodeResourceExhausted, 3 * time.Second, "3"},
		{problem.NoWorkerAvailable, 5 * time.Second, connect.CodeResourceExhausted, 5 * time.Second, "5"},
		{problem.Internal, 0, connect.CodeInternal, 0, ""},
	} {
		t.Run(string(tc.code), func(t *testing.T) {
			err := problem.ConnectError(tc.code, "the detail", tc.retryAfter)
			checkError(t, err, tc.code, tc.wantCode, tc.wantDelay)
			if got := err.Meta().Get("Retry-After"); got != tc.wantHeader {
				t.Errorf("Retry-After: got %q, want %q", got, tc.wantHeader)
			}
			if got := err.Message(); got != "the detail" {
				t.Errorf("message: got %q, want %q", got, "the detail")
			}
		})
	}
}

func TestConnectErrorUnknownCodeIsInternal(t *testing.T) {
	err := problem.ConnectError("no_such_code", "boom", time.Second)
	checkError(t, err, problem.Internal, connect.CodeInternal, 0)
}

// checkError checks err's gRPC code, the problem code of its ErrorInfo and
// its RetryInfo (none when wantDelay is 0).
func checkError(t *testing.T, err error, wantProblem problem.Code, wantCode connect.Code, wantDelay time.Duration) {
	t.Helper()
	if got := connect.CodeOf(err); got != wantCode {
		t.Errorf("gRPC code: got %v, want %v", got, wantCode)
	}
	if got, ok := problem.CodeOf(err); !ok || got != wantProblem {
		t.Errorf("problem code: got %q (%v), want %q", got, ok, wantProblem)
	}
	delay, ok := problem.RetryDelay(err)
	if wantDelay == 0 && ok {
		t.Errorf("RetryInfo: got a delay of %v, want none", delay)
	}
	if wantDelay != 0 && (!ok || delay != wantDelay) {
		t.Errorf("RetryInfo: got %v (%v), want %v", delay, ok, wantDelay)
	}
}

func TestCodeOfOtherErrors(t *testing.T) {
	for _, err := range []error{
		errors.New("plain"),
		connect.NewError(connect.CodeUnavailable, errors.New("no details")),
		nil,
	} {
		if code, ok := problem.CodeOf(err); ok {
			t.Errorf("CodeOf(%v): got %q, want none", err, code)
		}
		if d, ok := problem.RetryDelay(err); ok {
			t.Errorf("RetryDelay(%v): got %v, want none", err, d)
		}
	}
}
