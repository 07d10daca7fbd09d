import { Code, ConnectError } from "@connectrpc/connect";

import { idgenErrorInfo, retryInfoDelayMs } from "./details.js";

/**
 * IdgenError is what the client throws when a call fails: the gRPC status
 * code, idgen's problem code when the server named one, and how many
 * attempts were made.
 */
export class IdgenError extends Error {
  override name = "IdgenError";
  /** The gRPC status code of the last attempt. */
  readonly code: Code;
  /**
   * idgen's problem code ("invalid", "not_found", "namespace_exhausted",
   * "unavailable", …; see docs/architecture.md), or undefined when the
   * error did not come from idgen (a connection failure, a proxy).
   */
  readonly problem: string | undefined;
  /** The delay the server asked for before a retry, in milliseconds. */
  readonly retryAfterMs: number | undefined;
  /** The number of attempts made, the first included. */
  readonly attempts: number;
  /** The server's message, without the status code. */
  readonly rawMessage: string;
  /** The ConnectError of the last attempt. */
  override readonly cause: ConnectError;

  constructor(cause: ConnectError, attempts: number, op: string) {
    const after = attempts > 1 ? ` after ${attempts} attempts` : "";
    super(`idgen ${op}${after}: ${cause.message}`);
    this.cause = cause;
    this.code = cause.code;
    this.rawMessage = cause.rawMessage;
    this.problem = idgenErrorInfo(cause)?.reason.toLowerCase();
    this.retryAfterMs = serverDelayMs(cause);
    this.attempts = attempts;
  }
}

/**
 * StaleRevisionError says that a strict namespace's revision did not grow:
 * a request sent after a response with revision `floor` was received got
 * revision `revision` <= `floor`. The response came from a stale or
 * replaying server, and its IDs (`ids`) may have been handed out before: the
 * client does not return them and does not retry on its own.
 */
export class StaleRevisionError extends Error {
  override name = "StaleRevisionError";

  constructor(
    /** The namespace. */
    readonly namespace: string,
    /** The revision the response carried. */
    readonly revision: bigint,
    /** The highest revision received before the request was sent. */
    readonly floor: bigint,
    /** The first and last ID of the refused response. */
    readonly first: bigint | undefined,
    readonly last: bigint | undefined,
  ) {
    super(
      `idgen: namespace ${namespace}: revision ${revision} is not above ${floor}, which was received before the request: ` +
        "a stale or replaying server answered; its IDs were not used",
    );
  }
}

/**
 * The delay the server asked for in err: its google.rpc.RetryInfo, else its
 * Retry-After header (in seconds), in milliseconds; undefined when neither.
 */
export function serverDelayMs(err: ConnectError): number | undefined {
  const info = retryInfoDelayMs(err);
  if (info !== undefined) {
    return info;
  }
  const header = err.metadata.get("retry-after");
  if (header !== null && /^[0-9]{1,9}$/.test(header.trim())) {
    return Number(header.trim()) * 1000;
  }
  return undefined;
}
