import { Code, ConnectError } from "@connectrpc/connect";

import { problems, type Problem, type ProblemInfo } from "./codes.js";
import { idgenErrorInfo, retryInfoDelayMs } from "./details.js";

/** How the client retries; every field has a default. */
export interface RetryOptions {
  /** Attempts per call, the first included; 1 disables retries. Default 4. */
  maxAttempts?: number;
  /** The first backoff bound in milliseconds. Default 50. */
  backoffBaseMs?: number;
  /** The largest backoff bound in milliseconds. Default 2000. */
  backoffMaxMs?: number;
  /**
   * The longest delay the client accepts to wait when the server asks for
   * one (RetryInfo or Retry-After); a server that asks for more gets its
   * error returned at once. Default 30000.
   */
  maxRetryAfterMs?: number;
}

export const retryDefaults = {
  maxAttempts: 4,
  backoffBaseMs: 50,
  backoffMaxMs: 2000,
  maxRetryAfterMs: 30_000,
} as const;

/**
 * The backoff before retry number `retry` (1 for the first retry): between
 * half and all of min(max, base * 2^(retry - 1)), "equal jitter", as idgen's
 * Go client and server wait.
 */
export function backoffMs(retry: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const bound = Math.min(maxMs, baseMs * 2 ** Math.min(retry - 1, 30));
  const half = bound / 2;
  return half + random() * (bound - half);
}

/**
 * Whether a failed call may be sent again. Retrying an idgen call is always
 * safe (IDs the server made for a lost answer are a gap, never handed out
 * twice); it is useful only when the condition can pass. An error of idgen
 * names its code, whose row of idgen's table (problems) says whether to
 * retry later. Other errors are retried when the connection failed
 * (UNAVAILABLE), an attempt ran over its own timeout or was reset
 * (DEADLINE_EXCEEDED, ABORTED), or a RESOURCE_EXHAUSTED carries a
 * RetryInfo.
 */
export function retryable(err: ConnectError): boolean {
  const info = idgenErrorInfo(err);
  const row = info === undefined ? undefined : problemInfo(info.reason.toLowerCase());
  if (row !== undefined) {
    return row.retryLater;
  }
  switch (err.code) {
    case Code.Unavailable:
      return true;
    case Code.ResourceExhausted:
      return retryInfoDelayMs(err) !== undefined;
    case Code.Aborted:
    case Code.DeadlineExceeded:
      return info === undefined;
    default:
      return false;
  }
}

/** The row of idgen's table of a code, or undefined for a code it lacks. */
export function problemInfo(code: string): ProblemInfo | undefined {
  return Object.hasOwn(problems, code) ? problems[code as Problem] : undefined;
}

/** Waits ms milliseconds, or rejects as soon as signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
