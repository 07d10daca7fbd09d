package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
)

// A caller asks a server for IDs over one connection: each connection of a
// load test owns one, and nothing else uses it, so it need not be safe for
// concurrent use. The closed-loop and the open-loop drivers see only this
// interface; httpCaller implements it for HTTP/1.1, and another transport
// (gRPC) plugs in by implementing it too.
type caller interface {
	// call sends one request, waits for the whole answer and adds the IDs
	// in it to ids.
	call(ctx context.Context, ids *runSet) outcome
	// close closes the connection.
	close()
}

// outcome is what one call came to.
type outcome struct {
	// n is the number of IDs in the answer.
	n int
	// kind is "" for a good answer, else the kind of failure the summary
	// counts: status_NNN, short (fewer IDs than asked), timeout, bad_body
	// or transport.
	kind string
	// err is the failure, when kind is set.
	err error
	// noAnswer: nothing came back (the connection failed); the driver
	// pauses before trying again, so as not to spin on a server that is
	// gone, and does not count it when the run was ending anyway.
	noAnswer bool
}

// errShort marks a response with fewer IDs than requested.
var errShort = errors.New("fewer IDs than requested")

// httpCaller asks for IDs with GET requests on a keep-alive HTTP/1.1
// connection.
type httpCaller struct {
	conn *httpConn
	// want is the number of IDs a good answer holds; 0 when the request
	// path is the user's own (--path) and any number will do.
	want int
	// collect: add the IDs to the caller's runSet; otherwise they are
	// scanned (to count them) into scratch and dropped.
	collect bool
	scratch runSet
}

func newHTTPCaller(tgt target, cfg config) *httpCaller {
	c := &httpCaller{conn: newHTTPConn(tgt.dial, tgt.host, tgt.path, cfg.Timeout), collect: cfg.CheckUnique}
	if cfg.Path == "" {
		c.want = cfg.Count
	}
	return c
}

func (c *httpCaller) call(ctx context.Context, ids *runSet) outcome {
	resp, err := c.conn.do(ctx)
	if err != nil {
		return outcome{kind: errorKind(resp, err), err: err, noAnswer: true}
	}
	if resp.status != 200 {
		return outcome{kind: "status_" + strconv.Itoa(resp.status), err: fmt.Errorf("status %d", resp.status)}
	}
	into := ids
	if !c.collect {
		c.scratch.runs = c.scratch.runs[:0]
		into = &c.scratch
	}
	n, err := scanIDs(resp.body, into)
	switch {
	case err != nil:
		return outcome{n: n, kind: "bad_body", err: err}
	case n < c.want:
		return outcome{n: n, kind: "short", err: errShort}
	}
	return outcome{n: n}
}

func (c *httpCaller) close() { c.conn.close() }

// errorKind names the kind of a request that got no answer.
func errorKind(resp response, err error) string {
	var ne net.Error
	switch {
	case resp.status != 0 && resp.status != 200:
		return "status_" + strconv.Itoa(resp.status)
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return "transport"
	}
}
