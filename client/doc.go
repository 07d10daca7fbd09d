// Package client is the Go client of the idgen service.
//
// A Client draws Snowflake IDs (Next, NextN), dense IDs of a segment
// namespace (NextInNamespace, DrawNamespace) and decomposes Snowflake IDs
// (Parse) over idgen's HTTP API:
//
//	c, err := client.New("http://idgen:8080", client.Options{})
//	if err != nil { … }
//	defer c.Close()
//	id, err := c.Next(ctx)                       // one Snowflake ID
//	ids, err := c.NextN(ctx, 500)                // 500 of them, in one request
//	d, err := c.DrawNamespace(ctx, "orders", 10) // 10 order numbers, with their ranges
//
// The zero Options are usable as they are: up to four attempts per call,
// retried with exponential backoff and jitter on 429, 502, 503, 504 and
// network errors, never sooner than a Retry-After header asks; a circuit
// breaker that opens after five failed attempts in a row and lets one probe
// through after five seconds; no local cache.
//
// With no load balancer in front of the nodes, NewFailover takes every
// node's URL: a call moves on to the next node at once when one does not
// answer or answers 503 (it cannot prove its lease, or drains before it
// stops), and only a call that failed on every node counts for the
// circuit breaker.
//
// # Retries
//
// A retried draw may leave a gap (IDs whose response never arrived), never
// a duplicate. A retry waits the larger of the backoff and the server's
// Retry-After; when Retry-After is above Options.MaxRetryAfter, or the wait
// would pass the context's deadline, the call returns the error at once.
//
// # Fencing tokens
//
// DrawSnowflakes returns Snowflake IDs with the tokens of the worker leases
// that made them (Draw.Leases). For a strict namespace, every answer
// carries the namespace's revision, which grows with every fetch on any
// node; the client refuses an answer whose revision is not above the
// highest it has seen with a *StaleRevisionError (a database gone back in
// time, or a replayed answer).
//
// # Local block cache
//
// With Options.Cache set, the client fetches IDs a block at a time and
// hands them out in process, refilling in the background, so most calls
// cost no request. Cached IDs are as unique as any others, but IDs from two
// cached clients are no longer ordered by the time they were handed out
// (segment IDs increase per client only), and IDs still cached at Close are
// dropped (a gap). Leave the cache off where those matter.
//
// # Local generator
//
// NewGenerator makes Snowflake IDs in the caller's process, with no request
// per ID: it holds a worker-ID lease through idgen's lease API (a token of
// the leases scope) and runs the lease keeper an idgen node runs. It issues
// IDs only inside the lease's fence (above the previous holder's ceiling,
// at most the one the database committed) and before its local deadline,
// heartbeats, moves to a new lease when the old one is lost, and releases
// it with the last timestamp used on Close:
//
//	g, err := client.NewGenerator(ctx, "http://idgen:8080", client.GeneratorOptions{Token: secret})
//	if err != nil { … }
//	defer g.Close(ctx)
//	id, err := g.Next() // errors.Is(err, client.ErrUnavailable): no lease it can prove now
//
// docs/leases.md states the protocol, for generators in other languages.
//
// # Errors
//
// The service's errors are *Error values, which errors.Is matches against
// ErrInvalid, ErrNotFound, ErrUnavailable and the other sentinels by their
// code. ErrCircuitOpen says the breaker refused a call without sending it;
// network errors are wrapped with %w.
package client

//go:generate go test -run ^TestTypeScriptCodes$ . -args -update
