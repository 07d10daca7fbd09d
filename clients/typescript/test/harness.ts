// The server side of the client's tests: an in-process Connect server
// (connect-node over HTTP/2 on 127.0.0.1) that serves the generated
// IdService. Behind it is either
//   - a fake idgen in memory (the default), or
//   - a real idgen: set IDGEN_TEST_URL (e.g. http://127.0.0.1:8080) and the
//     server forwards every call there; IDGEN_TEST_TOKEN is sent as its
//     bearer token, and IDGEN_TEST_STRICT_NAMESPACE names a namespace in
//     strict mode that the tests may draw from. The calls go over the
//     Connect protocol on HTTP/2 (cleartext, as idgen serves gRPC), or on
//     HTTP/1.1 with IDGEN_TEST_HTTP_VERSION=1.1.
// Either way the in-process server can inject faults (an UNAVAILABLE with
// RetryInfo, a replayed older answer of a strict namespace) that a healthy
// idgen never produces on demand. Tests that need no fault talk to
// `direct`: the real idgen itself when IDGEN_TEST_URL is set.

import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";

import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type HandlerContext, type Interceptor, type ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter, createConnectTransport } from "@connectrpc/connect-node";

import { errorInfoDetail, retryInfoDetail } from "../src/details.js";
import {
  IdService,
  Source,
  type NextIdsRequest,
  type NextIdsResponseSchema,
  type ParseRequest,
  type ParseResponseSchema,
  type StreamIdsRequest,
  type StreamIdsResponseSchema,
} from "../src/gen/idgen/v1/ids_pb.js";

type NextIdsInit = MessageInitShape<typeof NextIdsResponseSchema>;
type StreamIdsInit = MessageInitShape<typeof StreamIdsResponseSchema>;
type ParseInit = MessageInitShape<typeof ParseResponseSchema>;
type IdServiceImpl = ServiceImpl<typeof IdService>;
type Drawn = Omit<StreamIdsInit, "$typeName" | "ranges"> & { ranges: { first: bigint; last: bigint }[] };

const namespacePattern = /^[a-z0-9][a-z0-9_.-]{0,63}$/;
const maxCount = 10_000;

/** An error as idgen answers it: status code, ErrorInfo, RetryInfo, Retry-After. */
export function idgenError(code: Code, problem: string | undefined, message: string, retryAfterMs?: number): ConnectError {
  const err = new ConnectError(message, code);
  if (problem !== undefined) {
    err.details.push(errorInfoDetail(problem));
  }
  if (retryAfterMs !== undefined) {
    err.details.push(retryInfoDetail(retryAfterMs));
    err.metadata.set("Retry-After", String(Math.max(1, Math.ceil(retryAfterMs / 1000))));
  }
  return err;
}

/**
 * FakeIdgen is idgen's IdService in memory: Snowflake IDs in the default
 * layout from one lease (datacenter 1, worker 7), a buffered namespace
 * "orders" and a strict namespace "invoices" whose revision grows with
 * every fetch. It validates as idgen does and counts what it generated.
 */
export class FakeIdgen implements IdServiceImpl {
  static readonly epochMs = 1767225600000n;
  readonly datacenter = 1;
  readonly worker = 7;
  readonly fencingVersion = 3n;
  /** IDs made so far (Snowflake and namespace). */
  generated = 0n;
  /** Streams being served now. */
  openStreams = 0;
  #lastMs = 0n;
  #seq = 0n;
  #counters = new Map<string, { next: bigint; strict: boolean; revision: bigint }>([
    ["orders", { next: 1000n, strict: false, revision: 0n }],
    ["invoices", { next: 1n, strict: true, revision: 0n }],
  ]);

  async nextIds(req: NextIdsRequest): Promise<NextIdsInit> {
    this.#validate(req.namespace, req.count, "count");
    const b = this.#draw(req.namespace, BigInt(req.count));
    const ids: bigint[] = [];
    for (const r of b.ranges) {
      for (let id = r.first; id <= r.last; id++) {
        ids.push(id);
      }
    }
    return { ids, namespace: req.namespace, ...b };
  }

  async *streamIds(req: StreamIdsRequest, ctx: HandlerContext): AsyncIterable<StreamIdsInit> {
    this.#validate(req.namespace, req.batchSize, "batch_size");
    if (req.total < 0n) {
      throw idgenError(Code.InvalidArgument, "invalid", "total must not be negative");
    }
    this.openStreams++;
    try {
      let sent = 0n;
      while (!ctx.signal.aborted && (req.total === 0n || sent < req.total)) {
        let n = BigInt(req.batchSize);
        if (req.total !== 0n && req.total - sent < n) {
          n = req.total - sent;
        }
        sent += n;
        yield this.#draw(req.namespace, n);
        // Let the caller's cancellation in between messages, as a real
        // server's flow control would.
        await new Promise((resolve) => setImmediate(resolve));
      }
    } finally {
      this.openStreams--;
    }
  }

  async parse(req: ParseRequest): Promise<ParseInit> {
    if (req.id < 0n) {
      throw idgenError(Code.InvalidArgument, "invalid", `${req.id} is not a Snowflake ID`);
    }
    const ms = (req.id >> 22n) + FakeIdgen.epochMs;
    return {
      id: req.id,
      time: { seconds: ms / 1000n, nanos: Number(ms % 1000n) * 1e6 },
      timestampMs: ms,
      datacenter: Number((req.id >> 17n) & 31n),
      worker: Number((req.id >> 12n) & 31n),
      sequence: Number(req.id & 4095n),
    };
  }

  #validate(namespace: string, count: number, name: string): void {
    if (count < 1 || count > maxCount) {
      throw idgenError(Code.InvalidArgument, "invalid", `${name} must be an integer from 1 to ${maxCount}`);
    }
    if (namespace !== "" && !namespacePattern.test(namespace)) {
      throw idgenError(Code.InvalidArgument, "invalid", "namespace must match ^[a-z0-9][a-z0-9_.-]{0,63}$");
    }
    if (namespace !== "" && !this.#counters.has(namespace)) {
      throw idgenError(Code.NotFound, "not_found", `namespace ${namespace} not found`);
    }
  }

  #draw(namespace: string, n: bigint): Drawn {
    this.generated += n;
    const c = this.#counters.get(namespace);
    if (c !== undefined) {
      const first = c.next;
      c.next += n;
      c.revision++;
      return {
        ranges: [{ first, last: first + n - 1n }],
        source: Source.SEGMENT,
        fencingToken: c.strict ? { token: { case: "revision", value: { revision: c.revision } } } : undefined,
      };
    }
    // Snowflake IDs: one range per millisecond, 4096 per millisecond.
    const ranges: { first: bigint; last: bigint }[] = [];
    while (n > 0n) {
      const now = BigInt(Date.now()) - FakeIdgen.epochMs;
      if (now > this.#lastMs) {
        this.#lastMs = now;
        this.#seq = 0n;
      } else if (this.#seq > 4095n) {
        this.#lastMs++; // the fake runs ahead of the clock rather than wait
        this.#seq = 0n;
      }
      const take = n < 4096n - this.#seq ? n : 4096n - this.#seq;
      const base = (this.#lastMs << 22n) | (BigInt(this.datacenter) << 17n) | (BigInt(this.worker) << 12n);
      ranges.push({ first: base | this.#seq, last: base | (this.#seq + take - 1n) });
      this.#seq += take;
      n -= take;
    }
    return {
      ranges,
      source: Source.SNOWFLAKE,
      fencingToken: {
        token: {
          case: "lease",
          value: { datacenter: this.datacenter, worker: this.worker, fencingVersion: this.fencingVersion },
        },
      },
    };
  }
}

/** Forwards every call to a real idgen. */
class Upstream implements IdServiceImpl {
  readonly #client;

  constructor(baseUrl: string, token: string | undefined) {
    const interceptors: Interceptor[] = [];
    if (token) {
      interceptors.push((next) => (req) => {
        req.header.set("Authorization", `Bearer ${token}`);
        return next(req);
      });
    }
    const httpVersion = process.env.IDGEN_TEST_HTTP_VERSION === "1.1" ? "1.1" : "2";
    this.#client = createClient(IdService, createConnectTransport({ baseUrl, httpVersion, interceptors }));
  }

  nextIds(req: NextIdsRequest, ctx: HandlerContext) {
    return this.#client.nextIds(req, { signal: ctx.signal });
  }

  streamIds(req: StreamIdsRequest, ctx: HandlerContext) {
    return this.#client.streamIds(req, { signal: ctx.signal });
  }

  parse(req: ParseRequest, ctx: HandlerContext) {
    return this.#client.parse(req, { signal: ctx.signal });
  }
}

/** A fault to inject into the next call. */
export interface Fault {
  code: Code;
  /** idgen's problem code, sent as ErrorInfo; none when undefined. */
  problem?: string;
  /** Sent as RetryInfo (and a Retry-After header) when set. */
  retryAfterMs?: number;
  /** Sent as a bare Retry-After header (seconds), with no RetryInfo. */
  retryAfterHeader?: string;
}

/**
 * Faults sits in front of a backend: it fails the next calls as told, and
 * can replay an older answer of a strict namespace, as a stale node would.
 */
export class Faults implements IdServiceImpl {
  readonly #backend: IdServiceImpl;
  #fail: Fault[] = [];
  #failStreamAfter: { messages: number; fault: Fault } | undefined;
  #replayNext = false;
  #replayStream = false;
  #lastStrict = new Map<string, unknown>();
  /** Calls that reached this server, faulty or not. */
  calls = { nextIds: 0, streamIds: 0, parse: 0 };

  constructor(backend: IdServiceImpl) {
    this.#backend = backend;
  }

  /** Fails the next calls, one fault each, in order. */
  failNext(...faults: Fault[]): void {
    this.#fail.push(...faults);
  }

  /** Ends the next stream with fault after it sent this many messages. */
  failStreamAfter(messages: number, fault: Fault): void {
    this.#failStreamAfter = { messages, fault };
  }

  /** Answers the next NextIds of a strict namespace with its previous answer. */
  replayNextStrict(): void {
    this.#replayNext = true;
  }

  /** Sends the first message of the next stream twice. */
  replayInNextStream(): void {
    this.#replayStream = true;
  }

  #injected(): ConnectError | undefined {
    const f = this.#fail.shift();
    return f === undefined ? undefined : toError(f);
  }

  async nextIds(req: NextIdsRequest, ctx: HandlerContext): Promise<NextIdsInit> {
    this.calls.nextIds++;
    const err = this.#injected();
    if (err) {
      throw err;
    }
    if (this.#replayNext && this.#lastStrict.has(req.namespace)) {
      this.#replayNext = false;
      return this.#lastStrict.get(req.namespace) as NextIdsInit;
    }
    const res = (await this.#backend.nextIds(req, ctx)) as NextIdsInit;
    if (res.fencingToken?.token?.case === "revision") {
      this.#lastStrict.set(req.namespace, res);
    }
    return res;
  }

  async *streamIds(req: StreamIdsRequest, ctx: HandlerContext): AsyncIterable<StreamIdsInit> {
    this.calls.streamIds++;
    const err = this.#injected();
    if (err) {
      throw err;
    }
    const failAfter = this.#failStreamAfter;
    this.#failStreamAfter = undefined;
    const replay = this.#replayStream;
    this.#replayStream = false;
    let sent = 0;
    for await (const msg of this.#backend.streamIds(req, ctx) as AsyncIterable<StreamIdsInit>) {
      if (failAfter !== undefined && sent === failAfter.messages) {
        throw toError(failAfter.fault);
      }
      yield msg;
      sent++;
      if (replay && sent === 1) {
        yield msg;
      }
    }
  }

  async parse(req: ParseRequest, ctx: HandlerContext): Promise<ParseInit> {
    this.calls.parse++;
    const err = this.#injected();
    if (err) {
      throw err;
    }
    return (await this.#backend.parse(req, ctx)) as ParseInit;
  }
}

function toError(f: Fault): ConnectError {
  const err = idgenError(f.code, f.problem, `injected ${f.problem ?? "fault"}`, f.retryAfterMs);
  if (f.retryAfterHeader !== undefined) {
    err.metadata.set("Retry-After", f.retryAfterHeader);
  }
  return err;
}

/** What a test talks to. */
export interface Harness {
  /** The in-process server with fault injection. */
  faultyUrl: string;
  faults: Faults;
  /** A server without faults: the real idgen when IDGEN_TEST_URL is set. */
  direct: { url: string; token: string | undefined };
  /** The fake idgen, when no real one is configured. */
  fake: FakeIdgen | undefined;
  /** A namespace in strict mode on the server behind. */
  strictNamespace: string;
  close(): Promise<void>;
}

/** Starts the in-process server in front of the fake or the real idgen. */
export async function startHarness(): Promise<Harness> {
  const realUrl = process.env.IDGEN_TEST_URL;
  const token = process.env.IDGEN_TEST_TOKEN || undefined;
  let fake: FakeIdgen | undefined;
  let backend: IdServiceImpl;
  let strictNamespace = "invoices";
  if (realUrl) {
    const ns = process.env.IDGEN_TEST_STRICT_NAMESPACE;
    if (!ns) {
      throw new Error("IDGEN_TEST_URL is set: set IDGEN_TEST_STRICT_NAMESPACE to a namespace in strict mode on that server");
    }
    strictNamespace = ns;
    backend = new Upstream(realUrl, token);
  } else {
    fake = new FakeIdgen();
    backend = fake;
  }
  const faults = new Faults(backend);
  const sessions = new Set<http2.ServerHttp2Session>();
  const server = http2.createServer(connectNodeAdapter({ routes: (router) => router.service(IdService, faults) }));
  server.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const faultyUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    faultyUrl,
    faults,
    direct: realUrl ? { url: realUrl, token } : { url: faultyUrl, token: undefined },
    fake,
    strictNamespace,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sessions) {
          s.destroy();
        }
      }),
  };
}
