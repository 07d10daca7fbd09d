package main

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawServer accepts connections on loopback and answers each request read
// from them with the next of its canned responses, byte for byte; a canned
// response of "" closes the connection instead, and one that ends in
// hangUp is written and then the connection closed. It records the requests.
type rawServer struct {
	ln        net.Listener
	responses []string
	wg        sync.WaitGroup

	mu       sync.Mutex
	requests []string
	accepts  int
}

// hangUp ends a canned response after which rawServer closes the connection.
const hangUp = "\x00hang-up"

func newRawServer(t *testing.T, responses ...string) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, responses: responses}
	s.wg.Go(s.serve)
	t.Cleanup(func() {
		_ = ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *rawServer) serve() {
	next := 0
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.accepts++
		s.mu.Unlock()
		br := bufio.NewReader(c)
		for {
			var req strings.Builder
			for {
				line, err := br.ReadString('\n')
				req.WriteString(line)
				if err != nil || line == "\r\n" {
					break
				}
			}
			if req.Len() == 0 || next >= len(s.responses) || s.responses[next] == "" {
				next++
				break
			}
			s.mu.Lock()
			s.requests = append(s.requests, req.String())
			s.mu.Unlock()
			resp, hang := strings.CutSuffix(s.responses[next], hangUp)
			_, _ = c.Write([]byte(resp))
			next++
			if hang {
				break
			}
		}
		_ = c.Close()
	}
}

func TestHTTPConn(t *testing.T) {
	const okJSON = `{"ids":["1"]}`
	tests := []struct {
		name       string
		responses  []string
		calls      int
		wantStatus []int
		wantBody   []string
		wantErr    []bool
		wantDials  int
	}{
		{
			name: "content-length, kept alive",
			responses: []string{
				"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n" + okJSON,
				"HTTP/1.1 200 OK\r\ncontent-length: 13\r\n\r\n" + okJSON,
			},
			calls: 2, wantStatus: []int{200, 200}, wantBody: []string{okJSON, okJSON}, wantErr: []bool{false, false}, wantDials: 1,
		},
		{
			name: "chunked with extension and trailer",
			responses: []string{
				"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\n{\"ids\r\n8\r\n\":[\"1\"]}\r\n0\r\nX-Trailer: 1\r\n\r\n",
				"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
			},
			calls: 2, wantStatus: []int{200, 200}, wantBody: []string{okJSON, "{}"}, wantErr: []bool{false, false}, wantDials: 1,
		},
		{
			name: "connection close, then redial",
			responses: []string{
				"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\nContent-Length: 2\r\n\r\n{}",
				"",
				"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n" + okJSON,
			},
			calls: 2, wantStatus: []int{503, 200}, wantBody: []string{"{}", okJSON}, wantErr: []bool{false, false}, wantDials: 2,
		},
		{
			name: "HTTP/1.0 body to EOF",
			responses: []string{
				"HTTP/1.0 200 OK\r\n\r\n" + okJSON + hangUp,
			},
			calls: 1, wantStatus: []int{200}, wantBody: []string{okJSON}, wantErr: []bool{false}, wantDials: 1,
		},
		{
			name: "100 continue skipped",
			responses: []string{
				"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n" + okJSON,
			},
			calls: 1, wantStatus: []int{200}, wantBody: []string{okJSON}, wantErr: []bool{false}, wantDials: 1,
		},
		{
			name: "malformed status line, then redial",
			responses: []string{
				"HTTX/9 nonsense\r\n\r\n",
				"",
				"HTTP/1.1 204 No Content\r\n\r\n",
			},
			calls: 2, wantStatus: []int{0, 204}, wantBody: []string{"", ""}, wantErr: []bool{true, false}, wantDials: 2,
		},
		{
			name:      "bad content-length",
			responses: []string{"HTTP/1.1 200 OK\r\nContent-Length: -4\r\n\r\n"},
			calls:     1, wantStatus: []int{0}, wantBody: []string{""}, wantErr: []bool{true}, wantDials: 1,
		},
		{
			name:      "bad chunk",
			responses: []string{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"},
			calls:     1, wantStatus: []int{0}, wantBody: []string{""}, wantErr: []bool{true}, wantDials: 1,
		},
		{
			name:      "closed before answering",
			responses: []string{""},
			calls:     1, wantStatus: []int{0}, wantBody: []string{""}, wantErr: []bool{true}, wantDials: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRawServer(t, tt.responses...)
			addr := srv.ln.Addr().String()
			c := newHTTPConn(addr, "example.test", "/ids?count=1", 5*time.Second)
			defer c.close()
			for i := range tt.calls {
				resp, err := c.do(context.Background())
				if (err != nil) != tt.wantErr[i] {
					t.Fatalf("call %d: error = %v, want error %v", i, err, tt.wantErr[i])
				}
				if resp.status != tt.wantStatus[i] || string(resp.body) != tt.wantBody[i] {
					t.Errorf("call %d: got %d %q, want %d %q", i, resp.status, resp.body, tt.wantStatus[i], tt.wantBody[i])
				}
			}
			c.close()
			_ = srv.ln.Close()
			srv.wg.Wait()
			if srv.accepts != tt.wantDials {
				t.Errorf("server accepted %d connections, want %d", srv.accepts, tt.wantDials)
			}
			for _, req := range srv.requests {
				if !strings.HasPrefix(req, "GET /ids?count=1 HTTP/1.1\r\nHost: example.test\r\n") {
					t.Errorf("request = %q, want GET /ids?count=1 with Host example.test", req)
				}
			}
		})
	}
}

func TestHTTPConnTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		// Read the request, never answer, hang up when the client gives up.
		_, _ = c.Read(make([]byte, 1024))
		_, _ = c.Read(make([]byte, 1))
		_ = c.Close()
	})
	c := newHTTPConn(ln.Addr().String(), "x", "/", 50*time.Millisecond)
	_, err = c.do(context.Background())
	c.close()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("do() error = %v, want a timeout", err)
	}
	if got := errorKind(response{}, err); got != "timeout" {
		t.Errorf("errorKind = %q, want timeout", got)
	}
}
