// Package idgen is idgen's application core: who may do what, how much,
// and what every outcome means, for every transport and every kind of
// holder.
//
// The domain packages (snowflake, allocator and its stores) decide which
// IDs may exist. This package sits above them and below the transports
// (httpapi, rpcapi), which only decode a call, hand it to the core and
// encode the answer:
//
//   - Errors: one Error type and one table of codes (Codes), from which
//     the HTTP status, the gRPC code, the retry-later rule and the title of
//     every answer come; ErrorOf words the domain's errors for callers.
//   - Callers: an Authorizer that checks a call's bearer token for the
//     scope of the family it calls, and a Limiter that charges each caller
//     for the IDs it takes; one rule for request IDs.
//   - Draws: a Service that draws Snowflake, segment, fallback and strict
//     IDs, and counts what it hands out (the metrics and the status page
//     read the counts).
//   - Leases: a Broker that runs the lease API for remote holders with the
//     node's own lease rules, and the settings that keep its worker IDs
//     apart from the node's.
//
// Nothing here reads a socket or knows a wire format.
package idgen
