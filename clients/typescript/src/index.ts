/**
 * The TypeScript client of idgen, the unique 64-bit ID service.
 *
 * IDs are bigint; String(id) gives the decimal string idgen's HTTP API
 * uses. See README.md.
 *
 * @packageDocumentation
 */
export {
  IdgenClient,
  type CallOptions,
  type ClientOptions,
  type Fence,
  type IdBatch,
  type IdSource,
  type NextIdsResult,
  type ParsedId,
} from "./client.js";
export { IdgenError, StaleRevisionError } from "./errors.js";
export { FailoverTransport, failsOver } from "./failover.js";
export { composeBounds, decodeId, encodeId, formatWidth, idFormats, type Bounds, type IdFormat, type Layout } from "./forms.js";
export { countIds, expandRanges, maxId, parseId, type IdRange } from "./ranges.js";
export { backoffMs, problemInfo, retryable, type RetryOptions } from "./retry.js";
export { problems, type Problem, type ProblemInfo } from "./codes.js";
export { RevisionTracker } from "./revision.js";
export { errorInfoDetail, idgenErrorInfo, retryInfoDelayMs, retryInfoDetail, type ErrorInfo } from "./details.js";
export * as idsProto from "./gen/idgen/v1/ids_pb.js";
export * as leaseProto from "./gen/idgen/v1/lease_pb.js";
export { SequenceClient, type Reservation, type SequenceClientOptions } from "./sequences.js";
export * as sequenceProto from "./gen/idgen/v1/sequence_pb.js";
