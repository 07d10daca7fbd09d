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
// and decompresses a unary request before any interceptor runs:
//
//   - IdService and LeaseService calls are authenticated from headers
//     alone; refusals (and UNAVAILABLE after Drain) are answered without
//     reading the body.
//   - Bodies are capped (maxBodyBytes), messages at MaxMessageBytes as sent
//     and decompressed (connect.WithReadMaxBytes, cappedGzip).
//   - Drain knows every request until its handler returns. Server deadlines
//     hold until StreamIds has its request; then it lifts the read deadline
//     and bounds each send (Config.StreamSendTimeout). Drain ends calls
//     waiting for a request at once and gives streams drainGrace.

const (
	// MaxMessageBytes bounds every request message, as sent and
	// decompressed; larger ones get RESOURCE_EXHAUSTED.
	MaxMessageBytes = idgen.MaxRequestBytes
	// maxBodyBytes bounds a body: one enveloped message (5-byte header).
	// A reflection stream's requests share it.
	maxBodyBytes = MaxMessageBytes + 5
)

// DefaultStreamSendTimeout bounds each StreamIds send when
// Config.StreamSendTimeout is zero.
const DefaultStreamSendTimeout = 30 * time.Second

// drainGrace is what Drain gives an open stream: one that sees the drain
// ends at once, one blocked on a caller not reading fails after it.
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

// cappedGzip inflates a gzip message up to MaxMessageBytes+1 bytes, then
// fails with errInflatedTooLarge. connect-go (v1.21.1) would inflate the
// rest into io.Discard to report its size (about 64 MiB for 64 KiB sent);
// this stops at once and connect still answers RESOURCE_EXHAUSTED.
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

// procedures returns idgen's procedures, the refusal label values (other
// paths are not counted, so callers cannot grow the label set).
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
	// connect gets a copy: net/http keeps deciding about the rest of the
	// body on its own.
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

// track makes c known to Drain; false once Drained (health and reflection
// then go on untracked, idgen's services are refused).
func (s *Server) track(c *call) bool {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	if s.closed {
		return false
	}
	s.inflight[c] = struct{}{}
	return true
}

// untrack forgets c when its handler returns; Drain must not touch it after.
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

// startStream lifts the read deadline and bounds the first send once
// StreamIds has its request; UNAVAILABLE when drained. A nil call does
// nothing.
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

// beforeSend bounds the next send, or returns UNAVAILABLE when drained.
// The deadline moves only once less than ¾ timeout is left: over HTTP/2
// each one costs a message to the connection's goroutine and a timer.
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
// now+drainGrace. Over HTTP/1.1 the read deadline is the connection's, so
// a body ending just then may see its context cancelled.
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

// admit checks the token for scope; the rate limit comes later, per ID.
func (s *Server) admit(r *http.Request, scope idgen.Scopes) (idgen.Caller, *connect.Error) {
	caller, err := s.auth.Authorize(r.Header.Values("Authorization"), scope)
	if err != nil {
		return caller, s.errorOf(r.Context(), err, "")
	}
	return caller, nil
}

// refuse answers with err in the call's protocol without reading its body.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, start time.Time, err *connect.Error) {
	if r.ProtoMajor == 1 && r.ContentLength != 0 {
		// Else net/http would first read up to 256 KiB of unread body,
		// waiting on a stalling caller.
		w.Header().Set("Connection", "close")
	}
	_ = s.errors.Write(w, r, err)
	if s.procedures[r.URL.Path] {
		s.metrics.done(r.URL.Path, start, err)
	}
}
