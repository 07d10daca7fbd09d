package main

// The trust boundary of the gRPC API, through the built binary: one
// request must not take a node down. See rpcapi's gate.go.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idgen-project/idgen"
	idgenv1 "github.com/idgen-project/idgen/proto/idgen/v1"
)

// Figures of the issue: what a node's peak RSS must stay under, and how
// long a stalled call may hold its connection.
const (
	maxPeakRSS   = 100 << 20
	maxStallHold = 15 * time.Second
	// answerBound bounds the wait for the answer to one hostile request:
	// a bound on a hang (the answers come in milliseconds, logged).
	answerBound = 30 * time.Second
)

const (
	trustSecret     = "trust-test-ids-secret"
	procNextIDs     = "/idgen.v1.IdService/NextIds"
	procStreamIDs   = "/idgen.v1.IdService/StreamIds"
	ctConnectUnary  = "application/proto"
	ctConnectStream = "application/connect+proto"
	ctGRPC          = "application/grpc"
)

// zeroReader reads zero bytes forever.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// startTrustNode starts the binary on a fresh SQLite database with a
// token of the ids scope (trustSecret) unless tokens is false, and args.
func startTrustNode(t *testing.T, bin string, tokens bool, args ...string) *proc {
	t.Helper()
	dir := t.TempDir()
	args = append([]string{"--dsn", "sqlite:" + filepath.Join(dir, "idgen.db"), "--holder", "trust-test"}, args...)
	if tokens {
		path := filepath.Join(dir, "tokens")
		if err := os.WriteFile(path, []byte("trust-caller ids "+idgen.HashSecret(trustSecret)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--tokens-file", path)
	}
	p := startBinary(t, bin, dir, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, args...)
	p.node().waitReady()
	return p
}

// peakRSS returns the process's peak resident set size (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// bomb returns gzip members of zero bytes, one MiB each decompressed,
// concatenated until the compressed size reaches size.
func bomb(t *testing.T, size int) []byte {
	t.Helper()
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	if _, err := io.CopyN(zw, zeroReader{}, 1<<20); err != nil {
		t.Fatal(err)
	}
	_ = zw.Close()
	return bytes.Repeat(member.Bytes(), max(1, size/member.Len()))
}

// envelope frames msg as a gRPC or Connect streaming message.
func envelope(flags byte, msg []byte) []byte {
	out := make([]byte, 5, 5+len(msg))
	out[0] = flags
	binary.BigEndian.PutUint32(out[1:], uint32(len(msg)))
	return append(out, msg...)
}

// answer is what a hostile request got.
type answer struct {
	status int    // HTTP status
	code   string // the gRPC status, or the Connect error code; "" for none
	took   time.Duration
}

// postHTTP1 sends a POST of path with header lines and a body of length
// bytes (-1: chunked) over a connection of its own, writing the body while
// it waits for the answer, and returns the answer once it came.
func postHTTP1(t *testing.T, addr, path string, header []string, body io.Reader, length int64) answer {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var head strings.Builder
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: idgen\r\n", path)
	for _, h := range header {
		head.WriteString(h + "\r\n")
	}
	if length >= 0 {
		fmt.Fprintf(&head, "Content-Length: %d\r\n", length)
	} else {
		head.WriteString("Transfer-Encoding: chunked\r\n")
	}
	head.WriteString("\r\n")
	start := time.Now()
	if _, err := io.WriteString(conn, head.String()); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer conn.Close() // ends the writer
	wg.Go(func() {
		if length < 0 {
			_, _ = io.Copy(newChunkedWriter(conn), body)
			return
		}
		_, _ = io.Copy(conn, body) // fails once the node closes the connection
	})
	_ = conn.SetReadDeadline(time.Now().Add(answerBound))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("POST %s: no answer: %v", path, err)
	}
	took := time.Since(start)
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	a := answer{status: resp.StatusCode, took: took}
	if s := resp.Header.Get("Grpc-Status"); s != "" {
		a.code = s
	} else if i := bytes.Index(b, []byte(`"code":"`)); i >= 0 {
		a.code, _, _ = strings.Cut(string(b[i+len(`"code":"`):]), `"`)
	}
	return a
}

// chunkedWriter writes an HTTP/1.1 chunked body.
type chunkedWriter struct{ w io.Writer }

func newChunkedWriter(w io.Writer) io.Writer { return chunkedWriter{w} }

func (c chunkedWriter) Write(p []byte) (int, error) {
	if _, err := fmt.Fprintf(c.w, "%x\r\n", len(p)); err != nil {
		return 0, err
	}
	if _, err := c.w.Write(p); err != nil {
		return 0, err
	}
	_, err := io.WriteString(c.w, "\r\n")
	return len(p), err
}

// h2c returns a transport of gRPC's HTTP/2 without TLS.
func h2c() *http.Transport {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	return &http.Transport{Protocols: &protocols}
}

// postGRPC sends a gRPC call of path with body over h2c (a connection of
// its own) and returns its answer.
func postGRPC(t *testing.T, addr, path string, header http.Header, body io.Reader) answer {
	t.Helper()
	tr := h2c()
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), answerBound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", ctGRPC)
	req.Header.Set("TE", "trailers")
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("gRPC %s: %v", path, err)
	}
	took := time.Since(start)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	a := answer{status: resp.StatusCode, took: took, code: resp.Trailer.Get("Grpc-Status")}
	if a.code == "" {
		a.code = resp.Header.Get("Grpc-Status")
	}
	return a
}

// TestBinaryTrustBoundary runs the hostile requests of the trust-boundary
// issue against the idgen binary with tokens: a 1 GiB unauthenticated
// call and 2 MB gzip bombs (Connect and gRPC) are answered at once and
// leave the node's peak RSS under 100 MB; 100 StreamIds calls that stall
// after their headers, over HTTP/1.1 and over h2c, are ended within 15 s;
// SIGTERM with stalled streams open exits 0; a stream under
// --rate-limit 10 --rate-burst 100 takes no more IDs than the bucket
// holds and refills over its time, as unary calls would.
func TestBinaryTrustBoundary(t *testing.T) {
	bin := buildBinary(t)
	auth := "Authorization: Bearer " + trustSecret

	t.Run("large bodies and bombs", func(t *testing.T) {
		p := startTrustNode(t, bin, true)
		pid := p.cmd.Process.Pid
		before := peakRSS(t, pid)
		big := bomb(t, 2<<20)
		small := bomb(t, idgen.MaxRequestBytes-1024) // within the cap compressed, 60 MiB inflated
		for _, tc := range []struct {
			name string
			send func(*testing.T) answer
			want string // gRPC status number or Connect code
		}{
			{"1 GiB Connect, no token", func(t *testing.T) answer {
				return postHTTP1(t, p.addr, procNextIDs, []string{"Content-Type: " + ctConnectUnary}, io.LimitReader(zeroReader{}, 1<<30), 1<<30)
			}, "unauthenticated"},
			{"1 GiB Connect chunked, no token", func(t *testing.T) answer {
				return postHTTP1(t, p.addr, procNextIDs, []string{"Content-Type: " + ctConnectUnary}, io.LimitReader(zeroReader{}, 1<<30), -1)
			}, "unauthenticated"},
			{"1 GiB gRPC, no token", func(t *testing.T) answer {
				return postGRPC(t, p.addr, procNextIDs, nil, io.LimitReader(zeroReader{}, 1<<30))
			}, strconv.Itoa(int(codes.Unauthenticated))},
			{"2 MB gzip bomb Connect, no token", func(t *testing.T) answer {
				return postHTTP1(t, p.addr, procNextIDs, []string{"Content-Type: " + ctConnectUnary, "Content-Encoding: gzip"}, bytes.NewReader(big), int64(len(big)))
			}, "unauthenticated"},
			{"2 MB gzip bomb gRPC, no token", func(t *testing.T) answer {
				return postGRPC(t, p.addr, procNextIDs, http.Header{"Grpc-Encoding": {"gzip"}}, bytes.NewReader(envelope(1, big)))
			}, strconv.Itoa(int(codes.Unauthenticated))},
			{"1 GiB Connect, token", func(t *testing.T) answer {
				return postHTTP1(t, p.addr, procNextIDs, []string{"Content-Type: " + ctConnectUnary, auth}, io.LimitReader(zeroReader{}, 1<<30), 1<<30)
			}, "resource_exhausted"},
			{"1 GiB gRPC message, token", func(t *testing.T) answer {
				// One message of 1 GiB, its envelope first.
				return postGRPC(t, p.addr, procNextIDs, http.Header{"Authorization": {"Bearer " + trustSecret}},
					io.MultiReader(bytes.NewReader([]byte{0, 0x40, 0, 0, 0}), io.LimitReader(zeroReader{}, 1<<30)))
			}, strconv.Itoa(int(codes.ResourceExhausted))},
			{"2 MB gzip bomb Connect, token", func(t *testing.T) answer {
				return postHTTP1(t, p.addr, procNextIDs, []string{"Content-Type: " + ctConnectUnary, "Content-Encoding: gzip", auth}, bytes.NewReader(big), int64(len(big)))
			}, "resource_exhausted"},
			{"60 KiB gzip bomb Connect, token", func(t *testing.T) answer {
				return postHTTP1(t, p.addr, procNextIDs, []string{"Content-Type: " + ctConnectUnary, "Content-Encoding: gzip", auth}, bytes.NewReader(small), int64(len(small)))
			}, "resource_exhausted"},
			{"60 KiB gzip bomb gRPC StreamIds, token", func(t *testing.T) answer {
				return postGRPC(t, p.addr, procStreamIDs, http.Header{"Grpc-Encoding": {"gzip"}, "Authorization": {"Bearer " + trustSecret}}, bytes.NewReader(envelope(1, small)))
			}, strconv.Itoa(int(codes.ResourceExhausted))},
			{"60 KiB gzip bomb gRPC health", func(t *testing.T) answer {
				return postGRPC(t, p.addr, "/grpc.health.v1.Health/Check", http.Header{"Grpc-Encoding": {"gzip"}}, bytes.NewReader(envelope(1, small)))
			}, strconv.Itoa(int(codes.ResourceExhausted))},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := tc.send(t)
				if a.code != tc.want || (a.status >= 500) {
					t.Errorf("got HTTP %d, code %q; want code %s", a.status, a.code, tc.want)
				}
				t.Logf("HTTP %d, code %s, answered in %v", a.status, a.code, a.took.Round(time.Millisecond))
			})
		}
		peak := peakRSS(t, pid)
		t.Logf("peak RSS (VmHWM): %.1f MB before, %.1f MB after", float64(before)/1e6, float64(peak)/1e6)
		if peak >= maxPeakRSS {
			t.Errorf("peak RSS %d bytes, want below %d", peak, maxPeakRSS)
		}
	})

	t.Run("stalled streams", func(t *testing.T) {
		p := startTrustNode(t, bin, true)
		const n = 100
		var (
			mu    sync.Mutex
			held  []time.Duration
			still int
			wg    sync.WaitGroup
		)
		record := func(d time.Duration, ended bool) {
			mu.Lock()
			defer mu.Unlock()
			if !ended {
				still++
				return
			}
			held = append(held, d)
		}
		for range n {
			// HTTP/1.1: the headers of a Connect stream, then nothing.
			wg.Go(func() {
				conn, err := net.Dial("tcp", p.addr)
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				start := time.Now()
				fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: idgen\r\nContent-Type: %s\r\n%s\r\nContent-Length: 100\r\n\r\n", procStreamIDs, ctConnectStream, auth)
				_ = conn.SetReadDeadline(start.Add(answerBound))
				_, err = io.Copy(io.Discard, conn)
				var ne net.Error
				record(time.Since(start), !errors.As(err, &ne) || !ne.Timeout())
			})
			// h2c: a gRPC stream whose request never comes, on a
			// connection of its own.
			wg.Go(func() {
				tr := h2c()
				defer tr.CloseIdleConnections()
				ctx, cancel := context.WithTimeout(context.Background(), answerBound)
				defer cancel()
				body, w := io.Pipe()
				defer w.Close()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+procStreamIDs, body)
				req.Header.Set("Content-Type", ctGRPC)
				req.Header.Set("Authorization", "Bearer "+trustSecret)
				start := time.Now()
				resp, err := tr.RoundTrip(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				record(time.Since(start), ctx.Err() == nil)
			})
		}
		wg.Wait()
		var longest time.Duration
		for _, d := range held {
			longest = max(longest, d)
		}
		t.Logf("%d stalled StreamIds calls (HTTP/1.1 and h2c): %d ended, the longest held %v; %d still open after %v",
			2*n, len(held), longest.Round(time.Millisecond), still, answerBound)
		if still > 0 || longest > maxStallHold {
			t.Errorf("stalled calls: %d still open after %v, the longest of the others held %v; want all ended within %v", still, answerBound, longest, maxStallHold)
		}
		if code := p.terminate(); code != 0 {
			t.Errorf("SIGTERM after the stalled calls: exit code %d, want 0", code)
		}
	})

	t.Run("SIGTERM with stalled and unread streams", func(t *testing.T) {
		p := startTrustNode(t, bin, true)
		// Three calls stalled after their headers (HTTP/1.1), one over
		// h2c.
		for range 3 {
			conn, err := net.Dial("tcp", p.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: idgen\r\nContent-Type: %s\r\n%s\r\nContent-Length: 100\r\n\r\n", procStreamIDs, ctConnectStream, auth)
		}
		tr := h2c()
		defer tr.CloseIdleConnections()
		body, w := io.Pipe()
		defer w.Close()
		stalled, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+p.addr+procStreamIDs, body)
		stalled.Header.Set("Content-Type", ctGRPC)
		stalled.Header.Set("Authorization", "Bearer "+trustSecret)
		go func() {
			if resp, err := tr.RoundTrip(stalled); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		// Two streams whose callers read nothing: over HTTP/1.1 (a
		// small receive buffer) and over h2c (the stream's flow-control
		// window).
		msg, _ := proto.Marshal(&idgenv1.StreamIdsRequest{BatchSize: 1})
		req := envelope(0, msg)
		conn, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: idgen\r\nContent-Type: %s\r\n%s\r\nContent-Length: %d\r\n\r\n%s",
			procStreamIDs, ctConnectStream, auth, len(req), req)
		unread, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+p.addr+procStreamIDs, bytes.NewReader(req))
		unread.Header.Set("Content-Type", ctGRPC)
		unread.Header.Set("Authorization", "Bearer "+trustSecret)
		resp, err := h2c().RoundTrip(unread)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close() // never read
		waitStreamsBlocked(t, p.node())

		start := time.Now()
		code := p.terminate()
		t.Logf("SIGTERM with 4 stalled StreamIds calls and 2 streams nobody reads: exit code %d after %v", code, time.Since(start).Round(time.Millisecond))
		if code != 0 {
			t.Errorf("exit code %d, want 0 (every step of the shutdown within --shutdown-timeout)\n%s", code, p.logs)
		}
	})

	t.Run("rate limit", func(t *testing.T) {
		const rate, burst = 10, 100
		p := startTrustNode(t, bin, false, "--rate-limit", "10", "--rate-burst", "100", "--max-count", "100")
		n := p.node()
		// HTTP first, as the issue did: 200, then 429.
		for _, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
			if code, _, body := n.get("/ids?count=100"); code != want {
				t.Errorf("GET /ids?count=100: got %d %s, want %d", code, body, want)
			}
		}
		time.Sleep(1100 * time.Millisecond) // eleven IDs back in the bucket
		conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		start := time.Now()
		st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, procStreamIDs)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(&idgenv1.StreamIdsRequest{BatchSize: 10}); err != nil {
			t.Fatal(err)
		}
		_ = st.CloseSend()
		var ids int64
		for {
			m := new(idgenv1.StreamIdsResponse)
			if err = st.RecvMsg(m); err != nil {
				break
			}
			for _, r := range m.GetRanges() {
				ids += r.GetLast() - r.GetFirst() + 1
			}
		}
		elapsed := time.Since(start)
		// What the bucket can have held: what refilled since the GETs
		// emptied it, at most a burst.
		most := min(int64(burst), rate*int64(elapsed/time.Second+3))
		t.Logf("one stream under --rate-limit %d --rate-burst %d: %d IDs in %v, ended with %v; the bucket allows at most %d",
			rate, burst, ids, elapsed.Round(time.Millisecond), status.Code(err), most)
		if ids < 10 || ids > most {
			t.Errorf("the stream took %d IDs in %v, want a batch of 10 at least (what refilled while the test slept) and at most %d", ids, elapsed, most)
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("the stream ended with %v, want ResourceExhausted", err)
		}
		var md metadata.MD = st.Trailer()
		if md.Get("retry-after") == nil {
			t.Errorf("the stream's end carries no retry-after: %v", md)
		}
	})
}

// waitStreamsBlocked waits until the node has sent messages on its
// streams and sends no more: their callers read nothing.
func waitStreamsBlocked(t *testing.T, n *node) {
	t.Helper()
	sentTotal := func() float64 {
		const name = "idgen_grpc_stream_messages_sent_total"
		_, _, body := n.get("/metrics")
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
				v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				return v
			}
		}
		return 0
	}
	deadline := time.Now().Add(answerBound)
	last, still := -1.0, 0
	for still < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("the streams did not block within %s", answerBound)
		}
		time.Sleep(100 * time.Millisecond)
		sent := sentTotal()
		if sent > 0 && sent == last {
			still++
		} else {
			still = 0
		}
		last = sent
	}
}
