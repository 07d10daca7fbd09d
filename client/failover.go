package client

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
)

// NewFailover returns a client for an idgen service reached at several
// base URLs, one per node, for callers with no load balancer in front of
// the nodes. The client sends every request to one node, the first at
// the start; when an attempt gets no answer (a refused or broken
// connection, a timeout) or a 503 (a node that cannot prove its lease,
// or that drains before it stops), it moves on to the next node in the
// list, round, and tries the call there at once, without a backoff, until
// every node was tried once in the call; after that the retries of
// Options apply. The circuit breaker counts a call's failure only once it
// failed on every node: a node that is down does not open it for the
// others. Asking another node again is always safe: an answer lost
// on the way only leaves a gap in the IDs.
//
// Each URL is checked as New checks its one; an empty list or a URL given
// twice is an error wrapping ErrInvalidInput.
func NewFailover(baseURLs []string, opts Options) (*Client, error) {
	return newFailoverClient(baseURLs, opts, systemClock{})
}

func newFailoverClient(baseURLs []string, opts Options, clk clock) (*Client, error) {
	if len(baseURLs) == 0 {
		return nil, fmt.Errorf("%w: no base URL", ErrInvalidInput)
	}
	ns, err := newNodes(baseURLs)
	if err != nil {
		return nil, err
	}
	c, err := newClient(baseURLs[0], opts, clk)
	if err != nil {
		return nil, err
	}
	c.nodes = ns
	return c, nil
}

// nodes are the base URLs a client sends to and the one in use; a
// client of New has one.
type nodes struct {
	urls []string
	cur  atomic.Uint64 // index into urls of the node in use
}

func newNodes(baseURLs []string) (*nodes, error) {
	n := &nodes{urls: make([]string, len(baseURLs))}
	seen := make(map[string]bool, len(baseURLs))
	for i, u := range baseURLs {
		base, err := parseBaseURL(u)
		if err != nil {
			return nil, err
		}
		if seen[base] {
			return nil, fmt.Errorf("%w: base URL %q given twice", ErrInvalidInput, redactURL(base))
		}
		seen[base] = true
		n.urls[i] = base
	}
	return n, nil
}

// current returns the index and base URL of the node in use.
func (n *nodes) current() (uint64, string) {
	i := n.cur.Load()
	return i, n.urls[i]
}

// failed moves on from node i to the next one, unless another request
// already moved on from it.
func (n *nodes) failed(i uint64) {
	n.cur.CompareAndSwap(i, (i+1)%uint64(len(n.urls)))
}

// BaseURL returns the base URL the client sends its requests to now: with
// NewFailover, the node it moved on to last.
func (c *Client) BaseURL() string {
	_, u := c.nodes.current()
	return u
}

// failsOver reports whether err, an attempt's, moves a client with
// several nodes on to the next: no answer, or 503.
func failsOver(err error) bool {
	var ne *netError
	if errors.As(err, &ne) {
		return true
	}
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusServiceUnavailable
}
