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
// The zero Options retry up to four attempts with backoff and jitter on
// 429, 502, 503, 504 and network errors (never sooner than Retry-After),
// with a circuit breaker that opens after five failures in a row; no cache.
// NewFailover takes every node's URL when there is no load balancer.
//
// A retried draw may leave a gap, never a duplicate. A Retry-After above
// Options.MaxRetryAfter or past the context's deadline returns the error at
// once.
//
// DrawSnowflakes returns the worker leases' fencing tokens (Draw.Leases). A
// strict namespace's answers carry its revision; one not above the highest
// seen is refused with a *StaleRevisionError.
//
// With Options.Cache the client fetches blocks and hands IDs out in
// process. Cached IDs stay unique, but lose cross-client order, and IDs
// still cached at Close are dropped (a gap).
//
// NewGenerator makes Snowflake IDs in process under a worker lease held
// through the lease API (docs/leases.md):
//
//	g, err := client.NewGenerator(ctx, "http://idgen:8080", client.GeneratorOptions{Token: secret})
//	if err != nil { … }
//	defer g.Close(ctx)
//	id, err := g.Next() // errors.Is(err, client.ErrUnavailable): no lease it can prove now
//
// The service's errors are *Error values matching ErrInvalid, ErrNotFound,
// ErrUnavailable and the other sentinels by code; ErrCircuitOpen means the
// breaker refused a call unsent; network errors are wrapped.
package client

//go:generate go test -run ^TestTypeScriptCodes$ . -args -update
