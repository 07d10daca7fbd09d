package rpcapi

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/proto/idgen/v1/idgenv1connect"
)

// The gate is an http.Handler in front of connect, because connect-go reads
// and decompresses a unary call's request before any interceptor runs:
//
//   - A call of IdService or LeaseService is authenticated from its headers
//     alone; a refusal (or, after Drain, UNAVAILABLE) is answered in the
//     caller's protocol without reading a byte of the body.
//   - Every body is read through http.MaxBytesReader (maxBodyBytes), and
//     every message is capped at MaxMessageBytes as sent and as
//     decompressed (connect.WithReadMaxBytes and cappedGzip).
//   - Every request is known to Drain until its handler returns (call). The
//     server's read and write deadlines stay on until StreamIds has its
//     request, so a call that stalls before is ended by ReadTimeout; then
//     StreamIds lifts the read deadline and bounds each send
//     (Config.StreamSendTimeout), so a caller that stops reading cannot
//     hold a stream. Drain ends the calls waiting for their request at once
//     (read deadline now) and gives streams drainGrace (write deadline).

const (
	// MaxMessageBytes bounds every request message, as sent and as
	// decompressed (idgen.MaxRequestBytes); a larger one is answered
	// RESOURCE_EXHAUSTED.
	MaxMessageBytes = idgen.MaxRequestBytes
	// maxBodyBytes bounds a request's whole body: one message in its
	// envelope (a flags byte and a 4-byte length). The requests of one
	// reflection stream share it.
	maxBodyBytes = MaxMessageBytes + 5
)

// DefaultStreamSendTimeout bounds each send of a StreamIds stream when
// Config.StreamSendTimeout is zero, as httpapi.WriteTimeout bounds an answer.
const DefaultStreamSendTimeout = 30 * time.Second

// drainGrace is how long Drain gives an open stream: one that sees the
// drain ends in microseconds, one blocked in a send on a caller that does
// not read fails when the grace has passed.
const drainGrace = time.Second

func handlerOptions(interceptors ...connect.Interceptor) connect.HandlerOption {
	return connect.WithHandlerOptions(
		connect.WithReadMaxBytes(MaxMessageBytes),
		connect.WithCompression("gzip",
			func() connect.Decompressor { return new(cappedGzip) },
			func() connect.Compressor { return gzip.NewWriter(io.Discard) }),
		connect.WithInterceptors(interceptors...),
	)
}

var errInflatedTooLarge = errors.New("rpcapi: message larger than the limit once decompressed")

// cappedGzip decompresses a gzip request message up to MaxMessageBytes+1
// bytes, then fails with errInflatedTooLarge. connect-go (v1.21.1,
// compressionPool.Decompress) inflates the rest of a message past the cap
// into io.Discard to report its size: with the stock gzip.Reader, about 64
// MiB for 64 KiB sent. This stops at once, and connect still answers
// RESOURCE_EXHAUSTED.
type cappedGzip struct {
	zr   gzip.Reader
	left int64
}

func (d *cappedGzip) Read(p []byte) (int, error) {
	if d.left <= 0 {
		return 0, errInflatedTooLarge
	}
	if int64(len(p)) > d.left {
		p = p[:d.left]
	}
	n, err := d.zr.Read(p)
	d.left -= int64(n)
	return n, err
}

func (d *cappedGzip) Reset(r io.Reader) error {
	d.left = MaxMessageBytes + 1
	return d.zr.Reset(r)
}

func (d *cappedGzip) Close() error { return d.zr.Close() }

// procedures returns the procedures of idgen's services: the label values
// the gate counts refusals under (other paths are not counted, so that
// callers cannot grow the label set).
func procedures() map[string]bool {
	out := make(map[string]bool)
	for _, name := range []string{idgenv1connect.IdServiceName, idgenv1connect.LeaseServiceName, idgenv1connect.SequenceServiceName} {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		sd, ok := d.(protoreflect.ServiceDescriptor)
		if err != nil || !ok {
			continue
		}
		for i := range sd.Methods().Len() {
			out["/"+name+"/"+string(sd.Methods().Get(i).Name())] = true
		}
	}
	return out
}

func (s *Server) serveGate(w http.ResponseWriter, r *http.Request) {
	c := &call{rc: http.NewResponseController(w)}
	c.body.r = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	if r.Body == nil || r.Body == http.NoBody {
		c.body.done.Store(true)
	}
	// A copy of the request goes on to connect: net/http keeps deciding
	// what to do with what is left of the body on the one it made.
	r2 := r.WithContext(r.Context())
	r2.Body = &c.body
	scope, ok := scopeOf(r.URL.Path)
	if !ok {
		// Health and reflection: open, as /healthz is.
		if s.track(c) {
			defer s.untrack(c)
		}
		s.mux.ServeHTTP(w, r2)
		return
	}
	start := time.Now()
	requestID := idgen.RequestID(r.Header.Values(idgen.HeaderRequestID))
	w.Header().Set(idgen.HeaderRequestID, requestID)
	var caller idgen.Caller
	var err *connect.Error
	if s.draining() {
		err = errShuttingDown()
	} else if caller, err = s.admit(r, scope); err == nil && !s.track(c) {
		err = errShuttingDown() // Drain came after the check above
	}
	if err != nil {
		s.refuse(w, r, start, err)
		return
	}
	defer s.untrack(c)
	caller.Address, caller.RequestID = r.RemoteAddr, requestID
	ci := callInfo{caller: caller, call: c}
	s.mux.ServeHTTP(w, r2.WithContext(context.WithValue(r.Context(), callInfoKey{}, ci)))
}

// track makes c known to Drain; false once Drain was called (health and
// reflection then go on untracked, idgen's services are refused).
func (s *Server) track(c *call) bool {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	if s.closed {
		return false
	}
	s.inflight[c] = struct{}{}
	return true
}

// untrack forgets c, whose handler returns: Drain must not touch its
// ResponseController after that.
func (s *Server) untrack(c *call) {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	delete(s.inflight, c)
}

// call is one request in the gate, known to Drain while its handler runs.
type call struct {
	rc   deadliner // *http.ResponseController, or a native stream's connWatch
	body gateBody

	mu        sync.Mutex
	streaming bool      // StreamIds has its request: its sends are bounded one by one
	drained   bool      // Drain has bounded its writes
	sendBy    time.Time // the write deadline set last
}

type gateBody struct {
	r    io.ReadCloser
	done atomic.Bool // EOF or an error was read: the request is in
}

func (b *gateBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil {
		b.done.Store(true)
	}
	return n, err
}

func (b *gateBody) Close() error { return b.r.Close() }

// startStream lifts the read deadline and bounds the first send, once
// StreamIds has its request; UNAVAILABLE for a drained call. A nil call (a
// Server used without its gate) does nothing.
func (c *call) startStream(timeout time.Duration) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.drained {
		return errShuttingDown()
	}
	c.streaming = true
	// Errors are ErrNotSupported: a ResponseWriter without deadlines.
	_ = c.rc.SetReadDeadline(time.Time{})
	c.sendBy = time.Now().Add(timeout)
	_ = c.rc.SetWriteDeadline(c.sendBy)
	return nil
}

// beforeSend bounds the next send of a stream, or returns UNAVAILABLE for
// a drained call. The deadline moves only once less than ¾ timeout is
// left, so that a busy stream does not pay for a deadline per message
// (over HTTP/2 one costs a message to the connection's goroutine and a
// timer).
func (c *call) beforeSend(timeout time.Duration) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.drained {
		return errShuttingDown()
	}
	if now := time.Now(); c.sendBy.Sub(now) < timeout/4*3 {
		c.sendBy = now.Add(timeout)
		_ = c.rc.SetWriteDeadline(c.sendBy)
	}
	return nil
}

// drain ends c's wait for its request and gives a stream until
// now+drainGrace. Over HTTP/1.1 the read deadline is the connection's: a
// call whose body ends just as Drain comes may see its context cancelled
// by net/http's background read.
func (c *call) drain(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drained = true
	if !c.body.done.Load() {
		_ = c.rc.SetReadDeadline(now)
	}
	if c.streaming {
		_ = c.rc.SetWriteDeadline(now.Add(drainGrace))
	}
}

// admit checks the call's token for scope; the rate limit is charged later,
// for the IDs the call takes.
func (s *Server) admit(r *http.Request, scope idgen.Scopes) (idgen.Caller, *connect.Error) {
	caller, err := s.auth.Authorize(r.Header.Values("Authorization"), scope)
	if err != nil {
		return caller, s.errorOf(r.Context(), err, "")
	}
	return caller, nil
}

// refuse answers a call with err in its own protocol without reading its
// body, and counts it.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, start time.Time, err *connect.Error) {
	if r.ProtoMajor == 1 && r.ContentLength != 0 {
		// Else net/http would read up to 256 KiB of the unread body first,
		// waiting on a caller that stalls.
		w.Header().Set("Connection", "close")
	}
	_ = s.errors.Write(w, r, err)
	if s.procedures[r.URL.Path] {
		s.metrics.done(r.URL.Path, start, err)
	}
}
