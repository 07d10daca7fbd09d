// Code generated from idgen.Codes() by TestTypeScriptCodes (client/codes_test.go); DO NOT EDIT.
// Regenerate with: go generate ./client

import { Code } from "@connectrpc/connect";

/** A row of idgen's table of codes: what every transport makes of a code. */
export interface ProblemInfo {
  /** The HTTP status of the code's problem answers. */
  readonly httpStatus: number;
  /** The gRPC status code of the code's errors. */
  readonly grpc: Code;
  /** Whether the condition passes by itself: a later attempt may succeed. */
  readonly retryLater: boolean;
  /** The problem answer's title. */
  readonly title: string;
}

/** idgen's codes (IdgenError.problem), each with its row. */
export const problems = {
  invalid: { httpStatus: 400, grpc: Code.InvalidArgument, retryLater: false, title: "Invalid request" },
  unauthorized: { httpStatus: 401, grpc: Code.Unauthenticated, retryLater: false, title: "Authentication required" },
  forbidden: { httpStatus: 403, grpc: Code.PermissionDenied, retryLater: false, title: "Forbidden" },
  not_found: { httpStatus: 404, grpc: Code.NotFound, retryLater: false, title: "Not found" },
  method_not_allowed: { httpStatus: 405, grpc: Code.Unimplemented, retryLater: false, title: "Method not allowed" },
  conflict: { httpStatus: 409, grpc: Code.AlreadyExists, retryLater: false, title: "Conflict" },
  namespace_exhausted: { httpStatus: 409, grpc: Code.FailedPrecondition, retryLater: false, title: "Namespace exhausted" },
  no_worker_available: { httpStatus: 409, grpc: Code.ResourceExhausted, retryLater: true, title: "No worker ID available" },
  lease_lost: { httpStatus: 409, grpc: Code.Aborted, retryLater: false, title: "Lease lost" },
  lease_not_held: { httpStatus: 409, grpc: Code.FailedPrecondition, retryLater: false, title: "Lease not held" },
  too_large: { httpStatus: 413, grpc: Code.ResourceExhausted, retryLater: false, title: "Request body too large" },
  invalid_release: { httpStatus: 422, grpc: Code.FailedPrecondition, retryLater: false, title: "Invalid release" },
  too_many: { httpStatus: 429, grpc: Code.ResourceExhausted, retryLater: true, title: "Too many requests" },
  unavailable: { httpStatus: 503, grpc: Code.Unavailable, retryLater: true, title: "Service unavailable" },
  storage_full: { httpStatus: 507, grpc: Code.ResourceExhausted, retryLater: true, title: "Database out of space" },
  internal: { httpStatus: 500, grpc: Code.Internal, retryLater: false, title: "Internal error" },
} as const satisfies Record<string, ProblemInfo>;

/** One of idgen's codes. */
export type Problem = keyof typeof problems;
