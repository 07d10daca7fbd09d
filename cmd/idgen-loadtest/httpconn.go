package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// maxBody bounds the body the tool reads: idgen's largest answer (10,000
// IDs with explain) is far below it.
const maxBody = 64 << 20

// httpConn is one keep-alive HTTP/1.1 connection that sends the same GET
// request again and again. It is a minimal client on purpose: the load
// generator shares the machine's cores with the server it measures, and
// net/http's client costs half as much again in CPU per request as writing a
// prepared request and parsing the status line, three headers and the body
// (measured on this machine: 13 µs of CPU per request against 19 µs).
// It handles Content-Length and chunked bodies and reconnects after
// "Connection: close" or any error. It is not safe for concurrent use.
type httpConn struct {
	addr    string // host:port to dial
	req     []byte // the whole request, sent as is
	timeout time.Duration
	dialer  net.Dialer

	nc   net.Conn
	br   *bufio.Reader
	body []byte
}

func newHTTPConn(addr, hostHeader, target string, timeout time.Duration) *httpConn {
	req := fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: idgen-loadtest\r\nAccept: application/json\r\n\r\n", target, hostHeader)
	return &httpConn{addr: addr, req: req, timeout: timeout, dialer: net.Dialer{Timeout: timeout}}
}

// response is the part of an HTTP response the tool looks at. body is valid
// until the next call of do.
type response struct {
	status int
	body   []byte
}

// do sends the request and reads the whole response. On any error the
// connection is closed and the next call dials afresh.
func (c *httpConn) do(ctx context.Context) (response, error) {
	if c.nc == nil {
		nc, err := c.dialer.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return response{}, fmt.Errorf("dial: %w", err)
		}
		c.nc = nc
		if c.br == nil {
			c.br = bufio.NewReaderSize(nc, 32<<10)
		} else {
			c.br.Reset(nc)
		}
	}
	if err := c.nc.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		c.close()
		return response{}, err
	}
	if _, err := c.nc.Write(c.req); err != nil {
		c.close()
		return response{}, fmt.Errorf("write request: %w", err)
	}
	resp, keepAlive, err := c.readResponse()
	if err != nil {
		c.close()
		return response{}, err
	}
	if !keepAlive {
		c.close()
	}
	return resp, nil
}

// close closes the connection, if open.
func (c *httpConn) close() {
	if c.nc != nil {
		_ = c.nc.Close()
		c.nc = nil
	}
}

var (
	hdrContentLength    = []byte("content-length")
	hdrTransferEncoding = []byte("transfer-encoding")
	hdrConnection       = []byte("connection")
)

// readResponse reads one response (skipping 1xx ones) and reports whether
// the connection may be reused.
func (c *httpConn) readResponse() (resp response, keepAlive bool, err error) {
	for {
		line, err := c.readLine()
		if err != nil {
			return resp, false, fmt.Errorf("read status line: %w", err)
		}
		// "HTTP/1.1 200 OK"
		if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
			return resp, false, fmt.Errorf("malformed status line %q", truncate(line))
		}
		keepAlive = line[7] == '1' // HTTP/1.0 closes unless told otherwise
		status, err := strconv.Atoi(string(line[9:12]))
		if err != nil || status < 100 {
			return resp, false, fmt.Errorf("malformed status line %q", truncate(line))
		}
		resp.status = status
		length, chunked := int64(-1), false
		for {
			line, err := c.readLine()
			if err != nil {
				return resp, false, fmt.Errorf("read header: %w", err)
			}
			if len(line) == 0 {
				break
			}
			colon := bytes.IndexByte(line, ':')
			if colon <= 0 {
				return resp, false, fmt.Errorf("malformed header %q", truncate(line))
			}
			name, value := line[:colon], bytes.TrimSpace(line[colon+1:])
			switch {
			case bytes.EqualFold(name, hdrContentLength):
				if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 || length > maxBody {
					return resp, false, fmt.Errorf("bad Content-Length %q", truncate(value))
				}
			case bytes.EqualFold(name, hdrTransferEncoding):
				chunked = bytes.EqualFold(value, []byte("chunked"))
				if !chunked {
					return resp, false, fmt.Errorf("unsupported Transfer-Encoding %q", truncate(value))
				}
			case bytes.EqualFold(name, hdrConnection):
				if bytes.EqualFold(value, []byte("close")) {
					keepAlive = false
				} else if bytes.EqualFold(value, []byte("keep-alive")) {
					keepAlive = true
				}
			}
		}
		if status < 200 {
			continue // 100 Continue and the like: the real answer follows
		}
		c.body = c.body[:0]
		switch {
		case status == 204 || status == 304:
		case chunked:
			err = c.readChunked()
		case length >= 0:
			c.body = grow(c.body, int(length))
			_, err = io.ReadFull(c.br, c.body)
		default: // no length: the body runs to the end of the connection
			keepAlive = false
			err = c.readToEOF()
		}
		if err != nil {
			return resp, false, fmt.Errorf("read body: %w", err)
		}
		resp.body = c.body
		return resp, keepAlive, nil
	}
}

// readChunked reads a chunked body into c.body, and the trailers after it.
func (c *httpConn) readChunked() error {
	for {
		line, err := c.readLine()
		if err != nil {
			return err
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i] // chunk extensions
		}
		size, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil || size < 0 || int64(len(c.body))+size > maxBody {
			return fmt.Errorf("bad chunk size %q", truncate(line))
		}
		if size == 0 {
			for { // trailers, up to the blank line
				line, err := c.readLine()
				if err != nil {
					return err
				}
				if len(line) == 0 {
					return nil
				}
			}
		}
		n := len(c.body)
		c.body = grow(c.body, n+int(size))
		if _, err := io.ReadFull(c.br, c.body[n:]); err != nil {
			return err
		}
		if line, err := c.readLine(); err != nil || len(line) != 0 {
			return errors.New("chunk not followed by CRLF")
		}
	}
}

// readToEOF reads the rest of the connection into c.body.
func (c *httpConn) readToEOF() error {
	for {
		if len(c.body) == cap(c.body) {
			if len(c.body) >= maxBody {
				return errors.New("body too large")
			}
			c.body = append(c.body, 0)[:len(c.body)]
		}
		n, err := c.br.Read(c.body[len(c.body):cap(c.body)])
		c.body = c.body[:len(c.body)+n]
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine returns the next line without its CRLF (or LF). The slice is
// valid until the next read.
func (c *httpConn) readLine() ([]byte, error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errors.New("header line too long")
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// grow returns b resized to n bytes, reusing its array when it is big enough.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	nb := make([]byte, n, max(n, 2*cap(b)))
	copy(nb, b)
	return nb
}

// truncate shortens b for an error message.
func truncate(b []byte) string {
	const n = 64
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
