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
// # Retries
//
// Every request idgen serves is a GET that changes nothing a retry could
// repeat: a retried draw may leave a gap (IDs the server handed out but the
// response never arrived), never a duplicate. A retry waits the larger of
// the backoff and the server's Retry-After. When Retry-After is longer than
// Options.MaxRetryAfter, or the wait would pass the context's deadline, the
// call returns the server's error at once instead of waiting in vain.
//
// # Fencing tokens
//
// DrawSnowflakes returns Snowflake IDs with the tokens of the worker leases
// that made them (Draw.Leases: datacenter, worker, fencing version). For a
// strict namespace, every answer carries the namespace's revision, which
// grows with every fetch on any node; the client remembers the highest
// revision it has seen per namespace and refuses an answer to a later
// request whose revision is not above it with a *StaleRevisionError: a
// node whose database went back in time, or a proxy that replayed an old
// answer. Draw.Revision is the revision of an accepted draw.
//
// # Local block cache
//
// With Options.Cache set, the client fetches IDs a block at a time (count=N)
// and hands them out in process, so most calls cost no request at all. When a
// block runs low the next one is fetched in the background. Cached Snowflake
// IDs are as unique as any others, but they are older by the time they are
// handed out, so IDs from two cached clients are no longer ordered by the time
// they were handed out; cached segment IDs come out in increasing order per
// client, not across clients. IDs still cached when the Client is closed are
// dropped and leave a gap. Leave the cache off where those matter.
//
// # Local generator
//
// NewGenerator makes Snowflake IDs in the caller's process, with no request
// per ID: it holds a worker-ID lease through idgen's lease API (/v1/leases,
// with a token of the leases scope) and runs the lease keeper an idgen node
// runs, over a LeaseStore that speaks that API. It issues IDs only inside
// the lease's fence and before its local deadline, heartbeats, moves to a
// new lease when the old one is lost, and releases it with the last
// timestamp used on Close:
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
// Errors the service answers with are *Error values carrying the fields of
// its application/problem+json body; errors.Is matches them against
// ErrInvalid, ErrNotFound, ErrUnavailable and the other sentinel errors of
// this package by their problem code. ErrCircuitOpen says the breaker refused
// a call without sending it; network errors are wrapped with %w.
package client
