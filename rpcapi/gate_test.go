package rpcapi_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/internal/testserver"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
)

// zeros reads zero bytes forever.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// countingBody is a request body that counts the bytes read of it.
type countingBody struct {
	r    io.Reader
	read atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error { return nil }

// envelope frames msg as a gRPC, gRPC-Web or Connect streaming message:
// a flags byte, the length, the bytes.
func envelope(flags byte, msg []byte) []byte {
	out := make([]byte, 5, 5+len(msg))
	out[0] = flags
	binary.BigEndian.PutUint32(out[1:], uint32(len(msg)))
	return append(out, msg...)
}

// gzipBomb returns gzip members of zero bytes, one MiB each decompressed,
// concatenated (gzip readers read every member of a stream) until the
// compressed size reaches size: about a thousand times size decompressed.
func gzipBomb(t testing.TB, size int) []byte {
	t.Helper()
	var member bytes.Buffer
	zw, err := gzip.NewWriterLevel(&member, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(zw, zeros{}, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.Repeat(member.Bytes(), max(1, size/member.Len()))
}

// Content types of the protocols connect-go serves.
const (
	ctConnectUnary  = "application/proto"
	ctConnectStream = "application/connect+proto"
	ctGRPCWeb       = "application/grpc-web+proto"
	ctGRPC          = "application/grpc"
)

// answerCode returns the status code name ("unauthenticated",
// "resource_exhausted", "ok") of a call's answer in any of the protocols:
// a gRPC or gRPC-Web status header or trailer, a Connect end-of-stream
// message, or a Connect unary error body.
func answerCode(t testing.TB, status int, header, trailer http.Header, body []byte) string {
	t.Helper()
	for _, h := range []http.Header{header, trailer} {
		if s := h.Get("Grpc-Status"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("grpc-status %q", s)
			}
			return connect.Code(n).String()
		}
	}
	switch ct := header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "application/grpc-web"), strings.HasPrefix(ct, "application/connect+"):
		for len(body) >= 5 {
			flags, n := body[0], int(binary.BigEndian.Uint32(body[1:5]))
			if len(body) < 5+n {
				break
			}
			msg := body[5 : 5+n]
			body = body[5+n:]
			if flags&0x01 != 0 { // compressed: the caller asked for gzip
				zr, err := gzip.NewReader(bytes.NewReader(msg))
				if err != nil {
					t.Fatalf("compressed frame: %v", err)
				}
				if msg, err = io.ReadAll(zr); err != nil {
					t.Fatalf("compressed frame: %v", err)
				}
			}
			switch {
			case flags&0x80 != 0: // a gRPC-Web trailer frame
				for _, line := range strings.Split(string(msg), "\r\n") {
					if v, ok := strings.CutPrefix(strings.ToLower(line), "grpc-status:"); ok {
						n, _ := strconv.Atoi(strings.TrimSpace(v))
						return connect.Code(n).String()
					}
				}
			case flags&0x02 != 0: // a Connect end-of-stream message
				var end struct {
					Error *struct{ Code string } `json:"error"`
				}
				if err := json.Unmarshal(msg, &end); err != nil {
					t.Fatalf("end of stream %q: %v", msg, err)
				}
				if end.Error == nil {
					return "ok"
				}
				return end.Error.Code
			}
		}
		t.Fatalf("no status in %d %v %q", status, header, body)
	}
	if status == http.StatusOK {
		return "ok"
	}
	var e struct{ Code string }
	if err := json.Unmarshal(body, &e); err != nil || e.Code == "" {
		t.Fatalf("Connect error body %q (%d): %v", body, status, err)
	}
	return e.Code
}

// inProcess sends a request with body to the node's handler, in process
// (HTTP/1.1), and returns the answer's status code name and the bytes of
// the body the node read.
func inProcess(t *testing.T, srv *testserver.Server, path, contentType string, header http.Header, body io.Reader) (code string, read int64, rec *httptest.ResponseRecorder) {
	t.Helper()
	cb := &countingBody{r: body}
	req := httptest.NewRequest(http.MethodPost, path, nil)
	req.Body, req.ContentLength = cb, -1
	req.Header.Set("Content-Type", contentType)
	for k, v := range header {
		req.Header[k] = v
	}
	rec = httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	res := rec.Result()
	return answerCode(t, rec.Code, rec.Header(), res.Trailer, rec.Body.Bytes()), cb.read.Load(), rec
}

// TestRefusedBeforeRead: on a node with tokens, a call of IdService or
// LeaseService without a valid token is refused UNAUTHENTICATED, in the
// caller's protocol, before a byte of its body is read, however large the
// body; and the refusal carries a request ID and is counted.
func TestRefusedBeforeRead(t *testing.T) {
	srv := testserver.MustStart(t, testserver.Options{Tokens: tokensFile()})
	const size = 8 << 20
	for _, tc := range []struct {
		name, path, contentType string
		header                  http.Header
	}{
		{"connect unary NextIds", procNextIds, ctConnectUnary, nil},
		{"connect unary NextIds gzip", procNextIds, ctConnectUnary, http.Header{"Content-Encoding": {"gzip"}}},
		{"connect stream StreamIds", procStreamIds, ctConnectStream, nil},
		{"grpc-web NextIds", procNextIds, ctGRPCWeb, nil},
		{"grpc-web StreamIds", procStreamIds, ctGRPCWeb, nil},
		{"connect unary GetLayout", procGetLayout, ctConnectUnary, nil},
		{"connect unary NextIds unknown token", procNextIds, ctConnectUnary, http.Header{"Authorization": {"Bearer not-a-token"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, read, rec := inProcess(t, srv, tc.path, tc.contentType, tc.header, io.LimitReader(zeros{}, size))
			if code != connect.CodeUnauthenticated.String() || read != 0 {
				t.Errorf("got %s after reading %d bytes of the body, want unauthenticated after reading none", code, read)
			}
			if !idgen.ValidRequestID(rec.Header().Get(idgen.HeaderRequestID)) {
				t.Errorf("request ID: got %q, want one", rec.Header().Get(idgen.HeaderRequestID))
			}
		})
	}
	if n := scrape(t, srv.URL, `idgen_grpc_requests_total{code="unauthenticated",procedure="/idgen.v1.IdService/NextIds"}`); n != 4 {
		t.Errorf("NextIds unauthenticated count: got %v, want 4", n)
	}
	// With the token, the same call is served, and answers with the
	// caller's request ID.
	msg, _ := proto.Marshal(&idgenv1.NextIdsRequest{Count: 2})
	code, _, rec := inProcess(t, srv, procNextIds, ctConnectUnary,
		http.Header{"Authorization": {"Bearer " + secretIDs}, idgen.HeaderRequestID: {"req-gate-1"}}, bytes.NewReader(msg))
	if code != "ok" || rec.Header().Get(idgen.HeaderRequestID) != "req-gate-1" {
		t.Errorf("NextIds with the token: got %s, request ID %q; want ok, req-gate-1", code, rec.Header().Get(idgen.HeaderRequestID))
	}
}

// TestMessageCaps: with a valid token, every request message is capped at
// the HTTP API's body limit, as sent and decompressed, on idgen's services
// and on health and reflection: a larger one is RESOURCE_EXHAUSTED, and
// the node reads no more than the cap of the body.
func TestMessageCaps(t *testing.T) {
	srv := testserver.MustStart(t, testserver.Options{Tokens: tokensFile()})
	auth := http.Header{"Authorization": {"Bearer " + secretIDs}}
	bomb := gzipBomb(t, idgen.MaxRequestBytes-1024) // about 60 MiB decompressed
	const big = 8 << 20
	for _, tc := range []struct {
		name, path, contentType string
		header                  http.Header
		body                    io.Reader
	}{
		{"connect unary NextIds", procNextIds, ctConnectUnary, auth, io.LimitReader(zeros{}, big)},
		{"connect unary NextIds gzip bomb", procNextIds, ctConnectUnary, http.Header{"Authorization": auth["Authorization"], "Content-Encoding": {"gzip"}}, bytes.NewReader(bomb)},
		{"connect stream StreamIds", procStreamIds, ctConnectStream, auth, io.MultiReader(bytes.NewReader([]byte{0, 0, 0x80, 0, 0}), io.LimitReader(zeros{}, big))},
		{"connect stream StreamIds gzip bomb", procStreamIds, ctConnectStream, http.Header{"Authorization": auth["Authorization"], "Connect-Content-Encoding": {"gzip"}}, bytes.NewReader(envelope(1, bomb))},
		{"grpc-web NextIds", procNextIds, ctGRPCWeb, auth, bytes.NewReader(envelope(0, make([]byte, big)))},
		{"health", "/grpc.health.v1.Health/Check", ctConnectUnary, nil, io.LimitReader(zeros{}, big)},
		{"health gzip bomb", "/grpc.health.v1.Health/Check", ctConnectUnary, http.Header{"Content-Encoding": {"gzip"}}, bytes.NewReader(bomb)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, read, _ := inProcess(t, srv, tc.path, tc.contentType, tc.header, tc.body)
			if code != connect.CodeResourceExhausted.String() || read > idgen.MaxRequestBytes+64 {
				t.Errorf("got %s after reading %d bytes of the body, want resource_exhausted after at most %d", code, read, idgen.MaxRequestBytes+64)
			}
		})
	}
}

// TestMessageCapsGRPC: the same caps over gRPC (HTTP/2 without TLS), on
// IdService with a valid token and on reflection, for a message as sent
// and gzip-compressed (grpc-encoding).
func TestMessageCapsGRPC(t *testing.T) {
	srv := testserver.MustStart(t, testserver.Options{Tokens: tokensFile()})
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	t.Cleanup(hc.CloseIdleConnections)
	bomb := gzipBomb(t, idgen.MaxRequestBytes-1024)
	for _, tc := range []struct {
		name, path string
		gzip       bool
		msg        []byte
	}{
		{"NextIds", procNextIds, false, envelope(0, make([]byte, 1<<20))},
		{"NextIds gzip bomb", procNextIds, true, envelope(1, bomb)},
		{"StreamIds gzip bomb", procStreamIds, true, envelope(1, bomb)},
		{"reflection", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", false, envelope(0, make([]byte, 1<<20))},
		{"reflection gzip bomb", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", true, envelope(1, bomb)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+tc.path, bytes.NewReader(tc.msg))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", ctGRPC)
			req.Header.Set("TE", "trailers")
			req.Header.Set("Authorization", "Bearer "+secretIDs)
			if tc.gzip {
				req.Header.Set("Grpc-Encoding", "gzip")
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if code := answerCode(t, resp.StatusCode, resp.Header, resp.Trailer, body); code != connect.CodeResourceExhausted.String() {
				t.Errorf("got %s (%s), want resource_exhausted", code, fmt.Sprint(resp.Header, resp.Trailer))
			}
		})
	}
}
