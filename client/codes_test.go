package client

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/idgen-project/idgen"
)

// TestCodesFollowTheCore walks idgen's one table of codes both ways: every
// code of the core has a sentinel here that its answers match, with the
// core's retry-later (over HTTP and over gRPC), and every code the client
// knows is one of the core's.
func TestCodesFollowTheCore(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	core := map[string]idgen.CodeInfo{}
	seen := map[error]string{}
	for _, row := range idgen.Codes() {
		code := string(row.Code)
		core[code] = row
		sentinel, ok := codeErrors[code]
		if !ok {
			t.Errorf("core code %s: no sentinel in the client", code)
			continue
		}
		if other, dup := seen[sentinel]; dup {
			t.Errorf("codes %s and %s share the sentinel %v", other, code, sentinel)
		}
		seen[sentinel] = code
		e := newError(row.HTTPStatus, http.Header{}, []byte(`{"code":"`+code+`"}`), now)
		if !errors.Is(e, sentinel) || e.Temporary() != row.RetryLater {
			t.Errorf("answer of code %s: matches %v: %v, temporary %v; want true, %v", code, sentinel, errors.Is(e, sentinel), e.Temporary(), row.RetryLater)
		}
		// An answer of the row's status without a body gets a code of the
		// same status.
		bare := newError(row.HTTPStatus, http.Header{}, nil, now)
		if got, ok := core[bare.Code]; ok && got.HTTPStatus != row.HTTPStatus {
			t.Errorf("a bare %d answer: code %s of status %d", row.HTTPStatus, bare.Code, got.HTTPStatus)
		}
		if _, ok := codeErrors[bare.Code]; !ok {
			t.Errorf("a bare %d answer: code %q, want one of the table", row.HTTPStatus, bare.Code)
		}
		// The lease store reads the gRPC error of the code, as rpcapi
		// sends it, with the same row.
		ce := connect.NewWireError(row.GRPC, errors.New("refused"))
		if d, err := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: strings.ToUpper(code), Domain: idgen.ErrorDomain}); err == nil {
			ce.AddDetail(d)
		}
		err := errorOfCall(ce)
		var ge *Error
		if !errors.As(err, &ge) || ge.Code != code || ge.Status != row.HTTPStatus || !errors.Is(err, sentinel) || ge.Temporary() != row.RetryLater {
			t.Errorf("gRPC error of code %s: got %#v (%v), want code %s, status %d, temporary %v, matching %v",
				code, ge, err, code, row.HTTPStatus, row.RetryLater, sentinel)
		}
	}
	for code := range codeErrors {
		if _, ok := core[code]; !ok {
			t.Errorf("client code %s is not a code of idgen.Codes()", code)
		}
	}
}

var update = flag.Bool("update", false, "rewrite the generated files the tests compare with")

// tsCodes is the TypeScript client's table of codes, generated from
// idgen.Codes() (go generate ./client) and checked for drift by
// TestTypeScriptCodes.
const tsCodes = "../clients/typescript/src/codes.ts"

// TestTypeScriptCodes: the TypeScript client's table is idgen.Codes(),
// rendered. With -update it rewrites the table instead.
func TestTypeScriptCodes(t *testing.T) {
	var b strings.Builder
	b.WriteString(`// Code generated from idgen.Codes() by TestTypeScriptCodes (client/codes_test.go); DO NOT EDIT.
// Regenerate with: go generate ./client

import { Code } from "@connectrpc/connect";

/** A row of idgen's table of codes: what every transport makes of a code. */
export interface ProblemInfo {
  /** The HTTP status of the code's problem answers. */
  readonly httpStatus: number;
  /** The gRPC status code of the code's errors. */
  readonly grpc: Code;
  /** Whether the condition passes by itself: a later attempt may succeed. */
  readonly retryLater: boolean;
  /** The problem answer's title. */
  readonly title: string;
}

/** idgen's codes (IdgenError.problem), each with its row. */
export const problems = {
`)
	for _, row := range idgen.Codes() {
		grpc := ""
		for _, w := range strings.Split(row.GRPC.String(), "_") {
			grpc += strings.ToUpper(w[:1]) + w[1:]
		}
		fmt.Fprintf(&b, "  %s: { httpStatus: %d, grpc: Code.%s, retryLater: %v, title: %q },\n", row.Code, row.HTTPStatus, grpc, row.RetryLater, row.Title)
	}
	b.WriteString("} as const satisfies Record<string, ProblemInfo>;\n\n/** One of idgen's codes. */\nexport type Problem = keyof typeof problems;\n")
	if *update {
		if err := os.WriteFile(tsCodes, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(tsCodes)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != b.String() {
		t.Errorf("%s differs from idgen.Codes(): run go generate ./client\n got:\n%s\nwant:\n%s", tsCodes, got, b.String())
	}
}

// TestPythonCodes checks the Python client's table against the core's:
// every code has an error class (code_name), every class names a code of
// the core, the retry-later codes are the core's, and the code a bare answer of a status gets has that status
// (502 and 504, a proxy's, read as unavailable).
func TestPythonCodes(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "clients", "python", "idgen_client", "errors.py"))
	if err != nil {
		t.Fatal(err)
	}
	core := map[string]idgen.CodeInfo{}
	for _, row := range idgen.Codes() {
		core[string(row.Code)] = row
	}
	classes := map[string]bool{}
	for _, m := range regexp.MustCompile(`code_name = "([a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		classes[m[1]] = true
		if _, ok := core[m[1]]; !ok {
			t.Errorf("errors.py: class of code %s, which is not a code of idgen.Codes()", m[1])
		}
	}
	for code := range core {
		if !classes[code] {
			t.Errorf("errors.py: no class with code_name %q", code)
		}
	}
	_, retry, ok := strings.Cut(string(src), "_RETRY_LATER = frozenset({")
	if !ok {
		t.Fatal("errors.py: no _RETRY_LATER set")
	}
	retry, _, _ = strings.Cut(retry, "}")
	later := map[string]bool{}
	for _, m := range regexp.MustCompile(`"([a-z_]+)"`).FindAllStringSubmatch(retry, -1) {
		later[m[1]] = true
	}
	for code, row := range core {
		if later[code] != row.RetryLater {
			t.Errorf("errors.py: _RETRY_LATER has %s: %v, want %v (the core's retry-later)", code, later[code], row.RetryLater)
		}
	}
	for code := range later {
		if _, ok := core[code]; !ok {
			t.Errorf("errors.py: _RETRY_LATER names %s, not a code of idgen.Codes()", code)
		}
	}
	_, table, ok := strings.Cut(string(src), "_STATUS_CODES: dict[int, str] = {")
	if !ok {
		t.Fatal("errors.py: no _STATUS_CODES table")
	}
	table, _, _ = strings.Cut(table, "}")
	rows := regexp.MustCompile(`(\d{3}): "([a-z_]+)"`).FindAllStringSubmatch(table, -1)
	if len(rows) == 0 {
		t.Fatal("errors.py: _STATUS_CODES is empty")
	}
	for _, m := range rows {
		status, _ := strconv.Atoi(m[1])
		row, ok := core[m[2]]
		proxy := row.Code == idgen.Unavailable && (status == http.StatusBadGateway || status == http.StatusGatewayTimeout)
		switch {
		case !ok:
			t.Errorf("errors.py: status %d read as %s, not a code of idgen.Codes()", status, m[2])
		case row.HTTPStatus != status && !proxy:
			t.Errorf("errors.py: status %d read as %s, whose status is %d", status, m[2], row.HTTPStatus)
		}
	}
}
