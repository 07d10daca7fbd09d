package rpcapi

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2/hpack"
)

// The split sends each connection of the node's listener to one of two
// servers by its first request: a gRPC call (HTTP/2 prior knowledge,
// application/grpc[+…]) to grpc-go's transport (native.go), anything else
// to the HTTP server (HTTP API and connect). A connection stays with its
// first choice; connect serves gRPC too, and grpc-go answers a later
// gRPC-Web or Connect call UNIMPLEMENTED (clients use one protocol per
// connection).
//
// The split reads the preface and frames up to the first HEADERS, decodes
// it (HPACK) and replays the bytes to the chosen server. grpc-go's client
// waits for the server's SETTINGS, so the split sends an empty one; net/http
// (unlike grpc-go) counts SETTINGS acks, so that ack is filtered out for it.

const (
	clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

	frameHeaders      = 0x1
	frameSettings     = 0x4
	frameContinuation = 0x9
	flagAck           = 0x1
	flagEndHeaders    = 0x4
	flagPadded        = 0x8
	flagPriority      = 0x20
	frameHeaderLen    = 9
	// maxSniffFrame is SETTINGS_MAX_FRAME_SIZE's initial value, the largest
	// frame a client sends before the server's settings.
	maxSniffFrame = 16384
	// maxSniffBytes bounds what is read before the first headers end.
	maxSniffBytes = 64 << 10
	// maxFrame is the largest frame HTTP/2 allows.
	maxFrame = 1<<24 - 1
)

// emptySettings is a SETTINGS frame without parameters.
var emptySettings = []byte{0, 0, 0, frameSettings, 0, 0, 0, 0, 0}

var errSniffTooLong = errors.New("rpcapi: no request headers in the first 64 KiB of an HTTP/2 connection")

// Listen serves ln's gRPC connections with grpc-go until Shutdown and
// returns a listener of the rest for the HTTP server. timeout bounds the
// wait for a first request (0: 10 s). Closing the returned listener
// closes ln. Call it once, and Shutdown after Drain.
func (s *Server) Listen(ln net.Listener, timeout time.Duration) net.Listener {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	sp := &splitter{
		ln:       ln,
		timeout:  timeout,
		stopC:    make(chan struct{}),
		sniffing: make(map[net.Conn]struct{}),
	}
	sp.httpLn = newChanListener(ln.Addr(), sp.close)
	sp.grpcLn = newChanListener(ln.Addr(), nil)
	s.splitMu.Lock()
	defer s.splitMu.Unlock()
	if s.shutdown {
		sp.close()
		return sp.httpLn
	}
	s.split = sp
	sp.wg.Go(sp.accept)
	sp.wg.Go(func() { _ = s.native.Serve(sp.grpcLn) })
	return sp.httpLn
}

// Shutdown ends the gRPC connections: it stops taking new ones, lets calls
// end (after Drain at once, or after drainGrace for a caller not reading),
// gives answers drainGrace to arrive and closes what is left (health and
// reflection streams). When ctx ends first it closes everything and
// returns ctx's error. Then it waits for the split's goroutines.
func (s *Server) Shutdown(ctx context.Context) error {
	s.splitMu.Lock()
	s.shutdown = true
	sp := s.split
	s.splitMu.Unlock()
	if sp == nil {
		return nil
	}
	sp.close()
	stopped := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		s.native.GracefulStop()
		close(stopped)
	})
	var err error
	select {
	case <-stopped:
	case <-s.idle:
		grace := time.NewTimer(drainGrace)
		select {
		case <-stopped:
		case <-grace.C:
			s.native.Stop()
		case <-ctx.Done():
			err = ctx.Err()
			s.native.Stop()
		}
		grace.Stop()
	case <-ctx.Done():
		err = ctx.Err()
		s.native.Stop()
	}
	wg.Wait()
	sp.wg.Wait()
	return err
}

// splitter owns the accept loop and the sniffing goroutines.
type splitter struct {
	ln             net.Listener
	timeout        time.Duration
	httpLn, grpcLn *chanListener
	stopC          chan struct{}
	stopOnce       sync.Once
	wg             sync.WaitGroup

	mu       sync.Mutex
	sniffing map[net.Conn]struct{} // connections not handed over yet
}

// close closes the listener and stops sniffing; it does not wait.
func (sp *splitter) close() {
	sp.stopOnce.Do(func() {
		close(sp.stopC)
		_ = sp.ln.Close()
		sp.httpLn.shut(nil)
		sp.grpcLn.shut(nil)
		sp.mu.Lock()
		defer sp.mu.Unlock()
		for c := range sp.sniffing {
			_ = c.SetReadDeadline(time.Now())
		}
	})
}

func (sp *splitter) stopped() bool {
	select {
	case <-sp.stopC:
		return true
	default:
		return false
	}
}

func (sp *splitter) accept() {
	for {
		c, err := sp.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !sp.stopped() {
				time.Sleep(10 * time.Millisecond) // as net/http does with a temporary error
				continue
			}
			sp.httpLn.shut(err) // the HTTP server's Serve returns it
			sp.close()
			return
		}
		sp.mu.Lock()
		if sp.stopped() {
			sp.mu.Unlock()
			_ = c.Close()
			continue
		}
		sp.sniffing[c] = struct{}{}
		sp.mu.Unlock()
		sp.wg.Go(func() { sp.route(c) })
	}
}

func (sp *splitter) route(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(sp.timeout))
	buf, pos, grpc, ackPending, err := sniff(c)
	sp.mu.Lock()
	delete(sp.sniffing, c)
	stopped := sp.stopped()
	sp.mu.Unlock()
	if stopped || err != nil {
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	rc := &replayConn{Conn: c, buf: buf}
	if !grpc {
		if ackPending {
			rc.buf, rc.tail = buf[:pos], buf[pos:]
			rc.filter = true
		}
		sp.httpLn.hand(rc)
		return
	}
	sp.grpcLn.hand(rc)
}

// sniff reads c to the end of its first request's headers. It returns the
// bytes read (without the split's SETTINGS ack), pos (the end of the
// frames checked for it), whether it is a gRPC call, and whether the ack
// is still to come. No HTTP/2 preface means HTTP/1, not gRPC.
func sniff(c net.Conn) (buf []byte, pos int, grpc, ackPending bool, err error) {
	buf = make([]byte, 0, 1024)
	read := func() error {
		if len(buf) == cap(buf) {
			if len(buf) >= maxSniffBytes {
				return errSniffTooLong
			}
			buf = append(buf, make([]byte, len(buf))...)[:len(buf)]
		}
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if n > 0 {
			return nil
		}
		return err
	}
	for len(buf) < len(clientPreface) {
		rerr := read()
		m := min(len(buf), len(clientPreface))
		if string(buf[:m]) != clientPreface[:m] {
			return buf, len(buf), false, false, nil
		}
		if rerr != nil {
			return buf, len(buf), false, false, rerr
		}
	}
	if _, err := c.Write(emptySettings); err != nil {
		return buf, len(buf), false, false, err
	}
	ackPending = true
	pos = len(clientPreface)
	need := func(n int) error {
		for len(buf) < pos+n {
			if err := read(); err != nil {
				return err
			}
		}
		return nil
	}
	var block []byte
	inHeaders := false
	for {
		if err := need(frameHeaderLen); err != nil {
			return buf, pos, false, ackPending, err
		}
		length := int(buf[pos])<<16 | int(buf[pos+1])<<8 | int(buf[pos+2])
		typ, flags := buf[pos+3], buf[pos+4]
		if length > maxSniffFrame {
			// Not a valid client: the HTTP server refuses it.
			return buf, pos, false, ackPending, nil
		}
		if err := need(frameHeaderLen + length); err != nil {
			return buf, pos, false, ackPending, err
		}
		end := pos + frameHeaderLen + length
		payload := buf[pos+frameHeaderLen : end]
		switch {
		case typ == frameSettings && flags&flagAck != 0 && ackPending:
			buf = append(buf[:pos], buf[end:]...)
			ackPending = false
			continue
		case typ == frameHeaders || (typ == frameContinuation && inHeaders):
			p := payload
			if typ == frameHeaders {
				if flags&flagPadded != 0 {
					if len(p) < 1 || int(p[0]) > len(p)-1 {
						return buf, pos, false, ackPending, nil
					}
					p = p[1 : len(p)-int(p[0])]
				}
				if flags&flagPriority != 0 {
					if len(p) < 5 {
						return buf, pos, false, ackPending, nil
					}
					p = p[5:]
				}
			}
			inHeaders = true
			block = append(block, p...)
			pos = end
			if flags&flagEndHeaders != 0 {
				return buf, pos, isGRPC(block), ackPending, nil
			}
		default:
			pos = end
		}
	}
}

// isGRPC reports whether a request's header block says it is a gRPC call.
func isGRPC(block []byte) bool {
	dec := hpack.NewDecoder(4096, nil)
	dec.SetMaxStringLength(maxSniffBytes)
	fields, err := dec.DecodeFull(block)
	if err != nil {
		return false
	}
	for _, f := range fields {
		if f.Name == "content-type" {
			v := f.Value
			return v == "application/grpc" || strings.HasPrefix(v, "application/grpc+") || strings.HasPrefix(v, "application/grpc;")
		}
	}
	return false
}

// replayConn is a handed-over connection: buf comes first. With filter,
// frames are read one by one until the split's SETTINGS ack, which is
// dropped; then bytes pass as they come.
type replayConn struct {
	net.Conn
	buf    []byte
	tail   []byte
	filter bool
}

func (c *replayConn) Read(p []byte) (int, error) {
	for len(c.buf) == 0 && c.filter {
		if err := c.nextFrame(); err != nil {
			return 0, err
		}
	}
	if len(c.buf) > 0 {
		n := copy(p, c.buf)
		c.buf = c.buf[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// readFull reads len(p) bytes from tail, then the connection.
func (c *replayConn) readFull(p []byte) error {
	n := copy(p, c.tail)
	c.tail = c.tail[n:]
	if n == len(p) {
		return nil
	}
	_, err := io.ReadFull(c.Conn, p[n:])
	return err
}

// nextFrame puts the next frame in buf, or drops the ack and ends filtering.
func (c *replayConn) nextFrame() error {
	var hdr [frameHeaderLen]byte
	if err := c.readFull(hdr[:]); err != nil {
		return err
	}
	length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
	if length > maxFrame {
		return errors.New("rpcapi: HTTP/2 frame too large")
	}
	frame := make([]byte, frameHeaderLen+length)
	copy(frame, hdr[:])
	if err := c.readFull(frame[frameHeaderLen:]); err != nil {
		return err
	}
	if hdr[3] == frameSettings && hdr[4]&flagAck != 0 {
		c.filter = false
		c.buf, c.tail = c.tail, nil
		return nil
	}
	c.buf = frame
	return nil
}

// chanListener is a net.Listener of the connections the split hands it.
type chanListener struct {
	addr    net.Addr
	conns   chan net.Conn
	done    chan struct{}
	once    sync.Once
	err     error // Accept's error once done is closed; nil: net.ErrClosed
	onClose func()
}

func newChanListener(addr net.Addr, onClose func()) *chanListener {
	return &chanListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{}), onClose: onClose}
}

// hand gives c to the server, or closes it once the listener is closed.
func (l *chanListener) hand(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		_ = c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		if l.err != nil {
			return nil, l.err
		}
		return nil, net.ErrClosed
	}
}

// shut closes the listener, Accept failing with err (nil: net.ErrClosed).
func (l *chanListener) shut(err error) {
	l.once.Do(func() {
		l.err = err
		close(l.done)
	})
}

// Close closes the listener and calls onClose.
func (l *chanListener) Close() error {
	l.shut(nil)
	if l.onClose != nil {
		l.onClose()
	}
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
