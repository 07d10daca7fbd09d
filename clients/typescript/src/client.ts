import { Code, ConnectError, createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import {
  Http2SessionManager,
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from "@connectrpc/connect-node";

import { IdgenError, serverDelayMs } from "./errors.js";
import { FailoverTransport } from "./failover.js";
import { decodeId, formatWidth as formatLength, idFormats, type Bounds, type IdFormat } from "./forms.js";
import {
  IdFormat as WireFormat,
  IdService,
  Source,
  type FencingToken,
  type IdRange as WireRange,
  type NextIdsResponse,
  type StreamIdsResponse,
} from "./gen/idgen/v1/ids_pb.js";
import { countIds, parseId, type IdRange } from "./ranges.js";
import { backoffMs, retryDefaults, retryable, sleep, type RetryOptions } from "./retry.js";
import { RevisionTracker } from "./revision.js";

/** Options of an IdgenClient. Only baseUrl (or baseUrls, or transport) is required. */
export interface ClientOptions extends RetryOptions {
  /** The idgen node or load balancer, for example "http://127.0.0.1:8080". */
  baseUrl?: string;
  /**
   * Several idgen nodes with no load balancer in front, instead of
   * baseUrl: calls go to one node and move on to the next when it does
   * not answer or answers UNAVAILABLE (FailoverTransport).
   */
  baseUrls?: readonly string[];
  /** A token of the caller, sent as "Authorization: Bearer <token>". */
  token?: string;
  /**
   * The protocol: "grpc" (HTTP/2), "connect" or "grpc-web" (HTTP/2 or
   * HTTP/1.1). Default "connect".
   */
  protocol?: "connect" | "grpc" | "grpc-web";
  /** HTTP version for connect and grpc-web; gRPC always uses "2". Default "2". */
  httpVersion?: "1.1" | "2";
  /** Bounds each unary attempt, in milliseconds. Default 5000. */
  attemptTimeoutMs?: number;
  /**
   * A transport of your own (interceptors, TLS options, a test transport);
   * replaces baseUrl, token, protocol and httpVersion.
   */
  transport?: Transport;
  /** Seams for tests: the random source of the backoff jitter, and the wait. */
  random?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** Where the IDs of a batch come from. */
export type IdSource = "snowflake" | "segment" | "fallback";

/**
 * What issued a batch's IDs: the worker lease for Snowflake IDs, the
 * namespace revision for a strict namespace; undefined for a buffered
 * namespace.
 */
export type Fence =
  | { kind: "lease"; datacenter: number; worker: number; fencingVersion: bigint }
  | { kind: "revision"; revision: bigint };

/** A batch of IDs, as ranges; see `ids` of NextIdsResult for them all. */
export interface IdBatch {
  /** The namespace asked for; "" for Snowflake IDs. */
  namespace: string;
  /** Where the IDs come from. */
  source: IdSource;
  /** The maximal runs of consecutive IDs, increasing. */
  ranges: IdRange[];
  /** The number of IDs in ranges. */
  count: bigint;
  /** What issued the IDs. */
  fence: Fence | undefined;
}

/** The answer of nextIds. */
export interface NextIdsResult extends IdBatch {
  /** The IDs, increasing, as bigint (String(id) gives the decimal string). */
  ids: bigint[];
  /** The IDs in the form asked for (or the namespace's setting on the server); empty without one. */
  texts: string[];
  /** The form of texts; undefined when empty. */
  format: IdFormat | undefined;
}

/** The decomposition of a Snowflake ID. */
export interface ParsedId {
  id: bigint;
  /** The ID in every form, at the layout's width (undefined from a server older than the forms). */
  forms: Record<IdFormat, string> | undefined;
  /** The ID's timestamp (millisecond precision). */
  time: Date;
  /** The same instant in Unix milliseconds. */
  timestampMs: bigint;
  datacenter: number;
  worker: number;
  sequence: number;
}

/** Per-call options. */
export interface CallOptions {
  /** Cancels the call (and its retries, and a stream). */
  signal?: AbortSignal;
}

/**
 * IdgenClient calls idgen's IdService over gRPC, gRPC-Web or the Connect
 * protocol. IDs are bigint, never JavaScript numbers. Failed calls that can
 * succeed later are retried with capped, jittered backoff, waiting at least
 * as long as the server asks (RetryInfo, else Retry-After). Responses of
 * strict namespaces are checked: their revision never goes backwards, or
 * the call fails with StaleRevisionError.
 */
export class IdgenClient {
  readonly #ids: Client<typeof IdService>;
  readonly #sessions: Http2SessionManager[] = [];
  readonly #revisions = new RevisionTracker();
  readonly #maxAttempts: number;
  readonly #backoffBaseMs: number;
  readonly #backoffMaxMs: number;
  readonly #maxRetryAfterMs: number;
  readonly #attemptTimeoutMs: number;
  readonly #random: () => number;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;

  constructor(options: ClientOptions) {
    const positive = (name: string, v: number | undefined, dflt: number): number => {
      if (v === undefined) {
        return dflt;
      }
      if (!Number.isFinite(v) || v <= 0) {
        throw new RangeError(`idgen client: ${name} must be a positive number, got ${v}`);
      }
      return v;
    };
    this.#maxAttempts = Math.floor(positive("maxAttempts", options.maxAttempts, retryDefaults.maxAttempts));
    this.#backoffBaseMs = positive("backoffBaseMs", options.backoffBaseMs, retryDefaults.backoffBaseMs);
    this.#backoffMaxMs = positive("backoffMaxMs", options.backoffMaxMs, retryDefaults.backoffMaxMs);
    this.#maxRetryAfterMs = positive("maxRetryAfterMs", options.maxRetryAfterMs, retryDefaults.maxRetryAfterMs);
    this.#attemptTimeoutMs = positive("attemptTimeoutMs", options.attemptTimeoutMs, 5000);
    this.#random = options.random ?? Math.random;
    this.#sleep = options.sleep ?? sleep;

    let transport = options.transport;
    if (transport === undefined) {
      const interceptors: Interceptor[] = [];
      if (options.token !== undefined) {
        const auth = `Bearer ${options.token}`;
        interceptors.push((next) => (req) => {
          req.header.set("Authorization", auth);
          return next(req);
        });
      }
      const protocol = options.protocol ?? "connect";
      const httpVersion = protocol === "grpc" ? "2" : (options.httpVersion ?? "2");
      const nodeTransport = (baseUrl: string): Transport => {
        if (httpVersion === "2") {
          const sessionManager = new Http2SessionManager(baseUrl);
          this.#sessions.push(sessionManager);
          // No compression: idgen's messages are a few dozen bytes, and a
          // server that sees gzip accepted compresses every one of them.
          const o = { baseUrl, interceptors, httpVersion, sessionManager, acceptCompression: [] };
          return protocol === "grpc"
            ? createGrpcTransport(o)
            : protocol === "grpc-web"
              ? createGrpcWebTransport(o)
              : createConnectTransport(o);
        }
        const o = { baseUrl, interceptors, httpVersion, acceptCompression: [] };
        return protocol === "grpc-web" ? createGrpcWebTransport(o) : createConnectTransport(o);
      };
      if (options.baseUrls !== undefined && options.baseUrl === undefined && options.baseUrls.length > 0) {
        transport = new FailoverTransport(options.baseUrls.map(nodeTransport));
      } else if (options.baseUrl !== undefined && options.baseUrls === undefined) {
        transport = nodeTransport(options.baseUrl);
      } else {
        throw new RangeError("idgen client: give baseUrl, or a non-empty baseUrls, not both");
      }
    }
    this.#ids = createClient(IdService, transport);
  }

  /**
   * Returns count new IDs: Snowflake IDs without a namespace, else IDs of
   * the namespace's counter.
   */
  async nextIds(request: { namespace?: string; count: number; format?: IdFormat }, options: CallOptions = {}): Promise<NextIdsResult> {
    const namespace = request.namespace ?? "";
    checkCount("count", request.count);
    const format = toWireFormat(request.format);
    let floor = -1n;
    const res = await this.#retry("NextIds", options.signal, (signal) => {
      floor = this.#revisions.floor(namespace);
      return this.#ids.nextIds({ namespace, count: request.count, format }, { signal, timeoutMs: this.#attemptTimeoutMs });
    });
    const batch = this.#batch(namespace, res, floor);
    return { ...batch, ids: res.ids, texts: res.idTexts, format: fromWireFormat(res.format) };
  }

  /**
   * Streams IDs in batches of batchSize until total IDs have come, or, when
   * total is 0 or absent, until options.signal aborts (or the loop breaks).
   * A stream that fails with a retryable error is reopened for the IDs still
   * missing; IDs of the batches already yielded stay valid.
   */
  async *streamIds(
    request: { namespace?: string; batchSize: number; total?: bigint | number },
    options: CallOptions = {},
  ): AsyncGenerator<IdBatch, void, undefined> {
    const namespace = request.namespace ?? "";
    checkCount("batchSize", request.batchSize);
    const total = BigInt(request.total ?? 0);
    if (total < 0n) {
      throw new RangeError(`idgen client: total must not be negative, got ${total}`);
    }
    let received = 0n;
    let failures = 0;
    // Cancel the server's stream when the caller stops early (break,
    // return, throw) as well as when its signal aborts.
    const ctl = new AbortController();
    const onAbort = () => ctl.abort(options.signal?.reason);
    if (options.signal?.aborted) {
      onAbort();
    } else {
      options.signal?.addEventListener("abort", onAbort, { once: true });
    }
    try {
      for (;;) {
        let floor = this.#revisions.floor(namespace);
        const remaining = total === 0n ? 0n : total - received;
        try {
          for await (const msg of this.#ids.streamIds(
            { namespace, batchSize: request.batchSize, total: remaining },
            { signal: ctl.signal },
          )) {
            if (ctl.signal.aborted) {
              // Messages already on their way still arrive after a cancel;
              // the caller gets none of them.
              throw new ConnectError("the stream was canceled", Code.Canceled, undefined, undefined, ctl.signal.reason);
            }
            const batch = this.#batch(namespace, msg, floor);
            if (batch.fence?.kind === "revision") {
              floor = batch.fence.revision;
            }
            received += batch.count;
            failures = 0;
            yield batch;
          }
          return;
        } catch (e) {
          const err = ConnectError.from(e);
          if (ctl.signal.aborted || !(e instanceof ConnectError) || !retryable(err)) {
            if (e instanceof ConnectError) {
              throw new IdgenError(err, failures + 1, "StreamIds");
            }
            throw e;
          }
          if (total !== 0n && received >= total) {
            return; // every ID came; the stream failed on its way out
          }
          failures++;
          await this.#waitBeforeRetry(err, failures, "StreamIds", ctl.signal);
        }
      }
    } finally {
      options.signal?.removeEventListener("abort", onAbort);
      ctl.abort();
    }
  }

  /**
   * Decomposes a Snowflake ID: a bigint, or a string in any of its forms
   * (decimal, base32, base62, hex; see decodeId), or in options.format. The
   * server reads the string by its layout's width.
   */
  async parse(id: bigint | string, options: CallOptions & { format?: IdFormat } = {}): Promise<ParsedId> {
    let req: { id: bigint } | { text: string; format: WireFormat };
    if (typeof id === "bigint") {
      req = { id: parseId(id) };
    } else {
      // What no layout reads is refused here; the server checks the rest
      // against its layout's width.
      if (typeof id !== "string" || !/^[0-9A-Za-z]{1,19}$/.test(id)) {
        throw new RangeError(`idgen: ${JSON.stringify(String(id)).slice(0, 40)} is not an ID in any form`);
      }
      if (options.format !== undefined || /^[0-9]+$/.test(id)) {
        decodeId(id, options.format ?? "decimal", widthOf(id, options.format));
      }
      req = { text: id, format: toWireFormat(options.format) };
    }
    const res = await this.#retry("Parse", options.signal, (signal) =>
      this.#ids.parse(req, { signal, timeoutMs: this.#attemptTimeoutMs }),
    );
    return {
      id: res.id,
      time: new Date(Number(res.timestampMs)),
      timestampMs: res.timestampMs,
      datacenter: res.datacenter,
      worker: res.worker,
      sequence: res.sequence,
      forms: res.forms ? { decimal: res.forms.decimal, base32: res.forms.base32, base62: res.forms.base62, hex: res.forms.hex } : undefined,
    };
  }

  /**
   * The smallest and the largest Snowflake ID of the millisecond of time, by
   * the server's layout: the IDs made from T1 to T2 are those from
   * compose(T1).first to compose(T2).last, a key range to scan. A time
   * outside the layout's range fails with INVALID_ARGUMENT.
   */
  async compose(time: Date, options: CallOptions = {}): Promise<Bounds> {
    if (!(time instanceof Date) || Number.isNaN(time.getTime())) {
      throw new RangeError("idgen: compose needs a valid Date");
    }
    const ms = BigInt(time.getTime());
    const res = await this.#retry("Compose", options.signal, (signal) =>
      this.#ids.compose(
        { time: { seconds: ms / 1000n - (ms % 1000n < 0n ? 1n : 0n), nanos: Number(((ms % 1000n) + 1000n) % 1000n) * 1_000_000 } },
        { signal, timeoutMs: this.#attemptTimeoutMs },
      ),
    );
    return { time: new Date(Number(ms)), first: res.first, last: res.last };
  }

  /** The highest revision received for a strict namespace, if any. */
  lastRevision(namespace: string): bigint | undefined {
    const r = this.#revisions.floor(namespace);
    return r < 0n ? undefined : r;
  }

  /** Closes the client's HTTP/2 connections. Calls made after fail. */
  close(): void {
    for (const s of this.#sessions) {
      s.abort();
    }
  }

  /** Converts a response, checking a strict namespace's revision. */
  #batch(namespace: string, res: NextIdsResponse | StreamIdsResponse, floor: bigint): IdBatch {
    const ranges = res.ranges.map((r: WireRange) => ({ first: r.first, last: r.last }));
    const fence = toFence(res.fencingToken);
    if (fence?.kind === "revision") {
      this.#revisions.check(namespace, floor, fence.revision, ranges[0]?.first, ranges.at(-1)?.last);
    }
    return { namespace, source: toSource(res.source), ranges, count: countIds(ranges), fence };
  }

  /** Runs attempt until it succeeds, fails for good, or runs out of attempts. */
  async #retry<T>(op: string, signal: AbortSignal | undefined, attempt: (signal?: AbortSignal) => Promise<T>): Promise<T> {
    for (let n = 1; ; n++) {
      try {
        return await attempt(signal);
      } catch (e) {
        if (!(e instanceof ConnectError)) {
          throw e;
        }
        if (signal?.aborted || !retryable(e) || n >= this.#maxAttempts) {
          throw new IdgenError(e, n, op);
        }
        await this.#waitBeforeRetry(e, n, op, signal);
      }
    }
  }

  /**
   * Waits before retry number n: the backoff, or longer when the server
   * asked for longer. Throws the error instead when the server asks for more
   * than maxRetryAfterMs, or when the call's maxAttempts is reached.
   */
  async #waitBeforeRetry(err: ConnectError, n: number, op: string, signal: AbortSignal | undefined): Promise<void> {
    if (n >= this.#maxAttempts) {
      throw new IdgenError(err, n, op);
    }
    let wait = backoffMs(n, this.#backoffBaseMs, this.#backoffMaxMs, this.#random);
    const asked = serverDelayMs(err);
    if (asked !== undefined) {
      if (asked > this.#maxRetryAfterMs) {
        throw new IdgenError(err, n, op);
      }
      wait = Math.max(wait, asked);
    }
    try {
      await this.#sleep(wait, signal);
    } catch {
      throw new IdgenError(new ConnectError("canceled while waiting to retry", Code.Canceled, undefined, undefined, err), n, op);
    }
  }
}

/** Refuses a count that is not a positive int32 before it reaches the wire. */
function checkCount(name: string, n: number): void {
  if (!Number.isInteger(n) || n < 1 || n > 0x7fffffff) {
    throw new RangeError(`idgen client: ${name} must be a positive integer, got ${n}`);
  }
}

function toSource(s: Source): IdSource {
  switch (s) {
    case Source.SNOWFLAKE:
      return "snowflake";
    case Source.SEGMENT:
      return "segment";
    case Source.FALLBACK:
      return "fallback";
    default:
      throw new ConnectError(`idgen sent an unknown source ${s}`, Code.Internal);
  }
}

function toFence(t: FencingToken | undefined): Fence | undefined {
  switch (t?.token.case) {
    case "lease":
      return {
        kind: "lease",
        datacenter: t.token.value.datacenter,
        worker: t.token.value.worker,
        fencingVersion: t.token.value.fencingVersion,
      };
    case "revision":
      return { kind: "revision", revision: t.token.value.revision };
    default:
      return undefined;
  }
}

/** The proto's number of a form; unspecified for none. */
function toWireFormat(f: IdFormat | undefined): WireFormat {
  if (f === undefined) {
    return WireFormat.UNSPECIFIED;
  }
  const i = idFormats.indexOf(f);
  if (i < 0) {
    throw new RangeError(`idgen: format ${JSON.stringify(f)} is none of ${idFormats.join(", ")}`);
  }
  return (i + 1) as WireFormat;
}

/** The form of the proto's number; undefined for unspecified. */
function fromWireFormat(f: WireFormat): IdFormat | undefined {
  return f === WireFormat.UNSPECIFIED ? undefined : idFormats[f - 1];
}

/** The widest ID width whose fixed length is text's in format (63 for decimal and any form). */
function widthOf(text: string, format: IdFormat | undefined): number {
  if (format === undefined || format === "decimal") {
    return 63;
  }
  for (let w = 63; w > 1; w--) {
    if (formatLength(format, w) === text.length) {
      return w;
    }
  }
  return 63;
}
