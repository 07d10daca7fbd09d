// The server side of the client's tests. By default a real idgen: the
// binary of this repository, started on SQLite on a free loopback port
// (idgen.ts). IDGEN_TEST_URL names a running idgen instead (with
// IDGEN_TEST_TOKEN, a token with the ids scope, and
// IDGEN_TEST_STRICT_NAMESPACE, a namespace in strict mode on it).
//
// In front of that idgen the tests can put two things that inject faults a
// healthy idgen never produces on demand:
//   - Faults, an in-process Connect server (connect-node over HTTP/2 on
//     127.0.0.1) serving the generated IdService by forwarding every call
//     to idgen; it can answer with an UNAVAILABLE that carries RetryInfo,
//     cut a stream in the middle, or replay an older answer of a strict
//     namespace, as a stale node would;
//   - FlakyProxy, a byte-level HTTP/2 proxy that answers the next requests
//     with a bare HTTP 503, as a load balancer with no healthy backend
//     does, and forwards the others untouched (gRPC trailers included).
// Tests that need no fault talk to idgen itself (`direct`).

import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";

import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type HandlerContext, type Interceptor, type ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter, createConnectTransport } from "@connectrpc/connect-node";

import { errorInfoDetail, retryInfoDetail } from "../src/details.js";
import {
  IdService,
  type NextIdsRequest,
  type NextIdsResponseSchema,
  type ComposeRequest,
  type ComposeResponseSchema,
  type ParseRequest,
  type ParseResponseSchema,
  type StreamIdsRequest,
  type StreamIdsResponseSchema,
} from "../src/gen/idgen/v1/ids_pb.js";
import { startIdgen, type IdgenProcess } from "./idgen.js";

type NextIdsInit = MessageInitShape<typeof NextIdsResponseSchema>;
type StreamIdsInit = MessageInitShape<typeof StreamIdsResponseSchema>;
type ParseInit = MessageInitShape<typeof ParseResponseSchema>;
type ComposeInit = MessageInitShape<typeof ComposeResponseSchema>;
type IdServiceImpl = ServiceImpl<typeof IdService>;

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

  compose(req: ComposeRequest, ctx: HandlerContext) {
    return this.#client.compose(req, { signal: ctx.signal });
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
  calls = { nextIds: 0, streamIds: 0, parse: 0, compose: 0 };
  /** Streams being forwarded now. */
  openStreams = 0;

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
    this.openStreams++;
    try {
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
    } finally {
      this.openStreams--;
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

  async compose(req: ComposeRequest, ctx: HandlerContext): Promise<ComposeInit> {
    this.calls.compose++;
    const err = this.#injected();
    if (err) {
      throw err;
    }
    return (await this.#backend.compose(req, ctx)) as ComposeInit;
  }
}

function toError(f: Fault): ConnectError {
  const err = idgenError(f.code, f.problem, `injected ${f.problem ?? "fault"}`, f.retryAfterMs);
  if (f.retryAfterHeader !== undefined) {
    err.metadata.set("Retry-After", f.retryAfterHeader);
  }
  return err;
}

/**
 * FlakyProxy forwards HTTP/2 streams to idgen byte for byte, headers and
 * trailers included, except that it answers the next requests (failNext)
 * with HTTP 503 and a Retry-After header and no gRPC status, as a load
 * balancer with no healthy backend does.
 */
export class FlakyProxy {
  readonly url: string;
  /** Requests that reached the proxy, and those it forwarded. */
  requests = 0;
  forwarded = 0;
  /** The headers of the last request. */
  lastHeaders: http2.IncomingHttpHeaders = {};
  readonly #server: http2.Http2Server;
  readonly #upstream: http2.ClientHttp2Session;
  readonly #sessions = new Set<http2.ServerHttp2Session>();
  #fail: string[] = [];

  private constructor(server: http2.Http2Server, upstream: http2.ClientHttp2Session, url: string) {
    this.#server = server;
    this.#upstream = upstream;
    this.url = url;
    server.on("session", (s) => {
      this.#sessions.add(s);
      s.on("close", () => this.#sessions.delete(s));
    });
    server.on("stream", (stream, headers) => this.#handle(stream, headers));
  }

  /** Starts a proxy on a free loopback port in front of upstreamUrl. */
  static async start(upstreamUrl: string): Promise<FlakyProxy> {
    const server = http2.createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const upstream = http2.connect(upstreamUrl);
    upstream.on("error", () => {}); // reported on the streams
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return new FlakyProxy(server, upstream, url);
  }

  /** Answers the next n requests with 503 and Retry-After: retryAfter. */
  failNext(n: number, retryAfter: string): void {
    for (let i = 0; i < n; i++) {
      this.#fail.push(retryAfter);
    }
  }

  #handle(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    this.requests++;
    this.lastHeaders = headers;
    const retryAfter = this.#fail.shift();
    if (retryAfter !== undefined) {
      stream.respond({ ":status": 503, "content-type": "text/plain", "retry-after": retryAfter });
      stream.end("no healthy upstream\n");
      return;
    }
    this.forwarded++;
    const out: http2.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(headers)) {
      if (k !== ":authority" && v !== undefined) {
        out[k] = v;
      }
    }
    const up = this.#upstream.request(out);
    let trailers: http2.IncomingHttpHeaders | undefined;
    up.on("response", (h) => {
      stream.respond(h, { waitForTrailers: true });
      up.pipe(stream);
    });
    up.on("trailers", (t) => (trailers = t));
    stream.on("wantTrailers", () => {
      const t: http2.OutgoingHttpHeaders = {};
      for (const [k, v] of Object.entries(trailers ?? {})) {
        if (!k.startsWith(":") && v !== undefined) {
          t[k] = v;
        }
      }
      stream.sendTrailers(t);
    });
    up.on("error", () => stream.destroyed || stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
    stream.on("error", () => up.destroyed || up.close(http2.constants.NGHTTP2_CANCEL));
    stream.on("close", () => up.destroyed || up.close(http2.constants.NGHTTP2_CANCEL));
    stream.pipe(up);
  }

  close(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      for (const s of this.#sessions) {
        s.destroy();
      }
      this.#upstream.destroy();
    });
  }
}

/** What a test talks to. */
export interface Harness {
  /** The in-process Connect server with fault injection. */
  faultyUrl: string;
  faults: Faults;
  /** The HTTP/2 proxy that can answer 503. */
  flaky: FlakyProxy;
  /** idgen itself, and a token with the ids scope on it. */
  direct: { url: string; token: string | undefined };
  /** The idgen process the harness started; undefined with IDGEN_TEST_URL. */
  idgen: IdgenProcess | undefined;
  /** A namespace in strict mode on idgen. */
  strictNamespace: string;
  close(): Promise<void>;
}

/** Starts idgen (unless IDGEN_TEST_URL is set) and the servers in front of it. */
export async function startHarness(): Promise<Harness> {
  let idgen: IdgenProcess | undefined;
  let url: string;
  let token: string | undefined;
  let strictNamespace: string;
  const given = process.env.IDGEN_TEST_URL;
  if (given) {
    const ns = process.env.IDGEN_TEST_STRICT_NAMESPACE;
    if (!ns) {
      throw new Error("IDGEN_TEST_URL is set: set IDGEN_TEST_STRICT_NAMESPACE to a namespace in strict mode on that server");
    }
    url = given;
    token = process.env.IDGEN_TEST_TOKEN || undefined;
    strictNamespace = ns;
  } else {
    idgen = await startIdgen();
    url = idgen.url;
    token = idgen.token;
    strictNamespace = idgen.strictNamespace;
  }
  const faults = new Faults(new Upstream(url, token));
  const sessions = new Set<http2.ServerHttp2Session>();
  const server = http2.createServer(connectNodeAdapter({ routes: (router) => router.service(IdService, faults) }));
  server.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const faultyUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const flaky = await FlakyProxy.start(url);
  return {
    faultyUrl,
    faults,
    flaky,
    direct: { url, token },
    idgen,
    strictNamespace,
    close: async () => {
      await flaky.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sessions) {
          s.destroy();
        }
      });
      await idgen?.stop();
    },
  };
}
