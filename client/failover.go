package client

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
)

// NewFailover returns a client for several nodes' base URLs. On no answer
// or a 503 it moves to the next node and retries at once; the breaker
// counts a call only once every node failed. Bad lists wrap ErrInvalidInput.
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

// nodes are a client's base URLs and the one in use.
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

func (n *nodes) current() (uint64, string) {
	i := n.cur.Load()
	return i, n.urls[i]
}

// failed moves on from node i, unless another request already did.
func (n *nodes) failed(i uint64) {
	n.cur.CompareAndSwap(i, (i+1)%uint64(len(n.urls)))
}

// BaseURL returns the base URL in use now.
func (c *Client) BaseURL() string {
	_, u := c.nodes.current()
	return u
}

// failsOver reports whether err moves to the next node: no answer or 503.
func failsOver(err error) bool {
	var ne *netError
	if errors.As(err, &ne) {
		return true
	}
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusServiceUnavailable
}
