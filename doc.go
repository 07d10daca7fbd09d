// Package idgen is idgen's application core: who may do what, how much,
// and what every outcome means, for every transport and kind of holder.
//
// It sits above the domain packages (snowflake, allocator) and below the
// transports (httpapi, rpcapi), which only decode, call it and encode:
// Error and the code table (Codes, ErrorOf); callers (Authorizer, Limiter,
// request IDs); draws (Service); and leases for remote holders (Broker).
// Nothing here reads a socket or knows a wire format.
package idgen
