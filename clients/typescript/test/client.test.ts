// The client against a real idgen (the binary of this repository, started
// by harness.ts), directly and through servers that inject faults.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Code } from "@connectrpc/connect";

import {
  IdgenClient,
  IdgenError,
  StaleRevisionError,
  composeBounds,
  decodeId,
  encodeId,
  expandRanges,
  type ClientOptions,
  type IdBatch,
} from "../src/index.js";
import { startHarness, type Harness } from "./harness.js";

let h: Harness;
const clients: IdgenClient[] = [];

before(async () => {
  h = await startHarness();
});

after(async () => {
  for (const c of clients) {
    c.close();
  }
  await h.close();
});

/** A client of the server without faults. */
function direct(options: Partial<ClientOptions> = {}): IdgenClient {
  const c = new IdgenClient({ baseUrl: h.direct.url, token: h.direct.token, ...options });
  clients.push(c);
  return c;
}

/** A client of the fault-injecting server, recording the waits it asks for. */
function faulty(options: Partial<ClientOptions> = {}): { client: IdgenClient; waits: number[] } {
  const waits: number[] = [];
  const client = new IdgenClient({
    baseUrl: h.faultyUrl,
    random: () => 0.5,
    sleep: async (ms) => {
      waits.push(ms);
    },
    ...options,
  });
  clients.push(client);
  return { client, waits };
}

function assertIncreasing(ids: bigint[], what: string): void {
  for (let i = 1; i < ids.length; i++) {
    assert.ok(ids[i]! > ids[i - 1]!, `${what}: id ${i} (${ids[i]}) is not above the one before (${ids[i - 1]})`);
  }
}

function assertRangesMatch(b: { ids: bigint[]; ranges: IdBatch["ranges"]; count: bigint }): void {
  assert.deepEqual([...expandRanges(b.ranges)], b.ids, "the ranges expand to the IDs");
  assert.equal(b.count, BigInt(b.ids.length));
}

describe("unary NextIds", () => {
  for (const protocol of ["connect", "grpc", "grpc-web"] as const) {
    it(`returns Snowflake IDs as bigint with their lease over ${protocol}`, async () => {
      const c = direct({ protocol });
      const res = await c.nextIds({ count: 5 });
      assert.equal(res.ids.length, 5);
      for (const id of res.ids) {
        assert.equal(typeof id, "bigint");
      }
      assertIncreasing(res.ids, "Snowflake IDs");
      assertRangesMatch(res);
      assert.equal(res.source, "snowflake");
      assert.equal(res.namespace, "");
      assert.equal(res.fence?.kind, "lease");
      if (res.fence?.kind === "lease") {
        assert.equal(typeof res.fence.fencingVersion, "bigint");
        assert.ok(res.fence.fencingVersion > 0n);
      }
    });
  }

  it("returns increasing IDs and revisions of a strict namespace", async () => {
    const c = direct();
    const a = await c.nextIds({ namespace: h.strictNamespace, count: 3 });
    const b = await c.nextIds({ namespace: h.strictNamespace, count: 2 });
    assert.equal(a.source, "segment");
    assert.equal(a.fence?.kind, "revision");
    assert.equal(b.fence?.kind, "revision");
    assertRangesMatch(a);
    assertRangesMatch(b);
    assertIncreasing([...a.ids, ...b.ids], "strict namespace IDs across calls");
    if (a.fence?.kind === "revision" && b.fence?.kind === "revision") {
      assert.ok(b.fence.revision > a.fence.revision, `revision ${b.fence.revision} is not above ${a.fence.revision}`);
      assert.equal(c.lastRevision(h.strictNamespace), b.fence.revision);
    }
  });

  it("answers bad input with INVALID_ARGUMENT and idgen's problem code, without retrying", async () => {
    const { client, waits } = faulty();
    const before = h.faults.calls.nextIds;
    await assert.rejects(client.nextIds({ namespace: "Not A Namespace", count: 1 }), (e: unknown) => {
      assert.ok(e instanceof IdgenError);
      assert.equal(e.code, Code.InvalidArgument);
      assert.equal(e.problem, "invalid");
      assert.equal(e.attempts, 1);
      return true;
    });
    assert.equal(h.faults.calls.nextIds - before, 1, "one call reached the server");
    assert.deepEqual(waits, []);
  });

  it("answers an unknown namespace with NOT_FOUND", async () => {
    const c = direct();
    await assert.rejects(c.nextIds({ namespace: "no-such-namespace-for-tests", count: 1 }), (e: unknown) => {
      assert.ok(e instanceof IdgenError);
      assert.equal(e.code, Code.NotFound);
      assert.equal(e.problem, "not_found");
      return true;
    });
  });

  it("answers a call without a token with UNAUTHENTICATED, without retrying", async () => {
    if (h.direct.token === undefined) {
      return; // the server has no tokens
    }
    const c = direct({ token: undefined });
    await assert.rejects(c.nextIds({ count: 1 }), (e: unknown) => {
      assert.ok(e instanceof IdgenError, `got ${e}`);
      assert.equal(e.code, Code.Unauthenticated);
      assert.equal(e.attempts, 1);
      return true;
    });
  });

  it("refuses a count that is no positive integer before sending", async () => {
    const c = direct();
    for (const count of [0, -1, 1.5, Number.NaN]) {
      await assert.rejects(c.nextIds({ count }), RangeError);
    }
  });
});

describe("Parse", () => {
  it("decomposes an ID the server issued into its lease's datacenter and worker", async () => {
    const c = direct();
    const res = await c.nextIds({ count: 1 });
    const id = res.ids[0]!;
    const p = await c.parse(id);
    assert.equal(p.id, id);
    assert.equal(res.fence?.kind, "lease");
    if (res.fence?.kind === "lease") {
      assert.equal(p.datacenter, res.fence.datacenter);
      assert.equal(p.worker, res.fence.worker);
    }
    assert.equal(p.time.getTime(), Number(p.timestampMs));
    const skew = Math.abs(Date.now() - Number(p.timestampMs));
    assert.ok(skew < 10 * 60 * 1000, `the ID's time ${p.time.toISOString()} is not near now`);
    // The same ID as a decimal string, as the HTTP API writes it.
    assert.deepEqual(await c.parse(String(id)), p);
  });

  it("refuses what is not an ID before sending", async () => {
    const c = direct();
    for (const bad of ["-1", "12-a", "", "9223372036854775808", 1n << 63n, "00000000000000000000"]) {
      await assert.rejects(c.parse(bad), RangeError, `parse(${String(bad)})`);
    }
    await assert.rejects(c.parse("1g", { format: "hex" }), RangeError);
  });
});

describe("forms and compose", () => {
  it("writes the form asked for and parses any form back", async () => {
    const c = direct();
    const res = await c.nextIds({ count: 5, format: "base62" });
    assert.equal(res.format, "base62");
    assert.equal(res.texts.length, 5);
    res.texts.forEach((t, i) => assert.equal(decodeId(t, "base62"), res.ids[i]));
    const plain = await c.nextIds({ count: 1 });
    assert.deepEqual(plain.texts, []);
    assert.equal(plain.format, undefined);
    const p = await c.parse(res.texts[2]!);
    assert.equal(p.id, res.ids[2]);
    assert.equal(p.forms?.hex, encodeId(res.ids[2]!, "hex"));
    assert.deepEqual(await c.parse(p.forms!.hex, { format: "hex" }), p);
    await assert.rejects(c.parse("zz"), (e: unknown) => e instanceof IdgenError && e.code === Code.InvalidArgument);
  });

  it("composes the bounds the layout gives, which parse back to their millisecond", async () => {
    const c = direct();
    const at = new Date("2026-11-27T12:34:56.789Z");
    const b = await c.compose(at);
    const classic = { timeBits: 41, datacenterBits: 5, workerBits: 5, sequenceBits: 12, epochMs: 1767225600000n };
    assert.deepEqual(b, composeBounds(classic, at));
    const first = await c.parse(b.first);
    const last = await c.parse(b.last);
    assert.equal(first.timestampMs, BigInt(at.getTime()));
    assert.equal(last.timestampMs, BigInt(at.getTime()));
    assert.deepEqual([first.datacenter, first.worker, first.sequence], [0, 0, 0]);
    assert.deepEqual([last.datacenter, last.worker, last.sequence], [31, 31, 4095]);
    await assert.rejects(c.compose(new Date("2025-01-01T00:00:00Z")), (e: unknown) => e instanceof IdgenError && e.code === Code.InvalidArgument);
  });
});

describe("StreamIds", () => {
  it("streams a total in batches whose ranges hold every ID once", async () => {
    const c = direct();
    const seen: bigint[] = [];
    const sizes: bigint[] = [];
    for await (const b of c.streamIds({ batchSize: 1000, total: 10_500 })) {
      assert.equal(b.source, "snowflake");
      assert.equal(b.fence?.kind, "lease");
      sizes.push(b.count);
      seen.push(...expandRanges(b.ranges));
    }
    assert.deepEqual(sizes, [...Array(10).fill(1000n), 500n]);
    assert.equal(seen.length, 10_500);
    assertIncreasing(seen, "streamed IDs");
  });

  it("streams a strict namespace with a growing revision per message", async () => {
    const c = direct();
    const revisions: bigint[] = [];
    for await (const b of c.streamIds({ namespace: h.strictNamespace, batchSize: 10, total: 30 })) {
      assert.equal(b.fence?.kind, "revision");
      if (b.fence?.kind === "revision") {
        revisions.push(b.fence.revision);
      }
    }
    assert.equal(revisions.length, 3);
    assertIncreasing(revisions, "revisions of one stream");
  });

  it("stops the server's stream when the caller cancels", async () => {
    const { client } = faulty();
    const ctl = new AbortController();
    let batches = 0;
    await assert.rejects(
      (async () => {
        for await (const b of client.streamIds({ batchSize: 100 }, { signal: ctl.signal })) {
          assert.equal(b.count, 100n);
          if (++batches === 3) {
            ctl.abort();
          }
        }
      })(),
      (e: unknown) => e instanceof IdgenError && e.code === Code.Canceled,
    );
    assert.equal(batches, 3, "no batch after the cancel");
    await waitFor(() => h.faults.openStreams === 0, "the stream to idgen was canceled");
  });

  it("stops the server's stream when the loop breaks", async () => {
    const { client } = faulty();
    for await (const b of client.streamIds({ batchSize: 10 })) {
      assert.equal(b.count, 10n);
      break;
    }
    await waitFor(() => h.faults.openStreams === 0, "the stream to idgen was canceled");
  });

  it("resumes after an UNAVAILABLE mid-stream with only the IDs still missing", async () => {
    const { client, waits } = faulty();
    const before = h.faults.calls.streamIds;
    h.faults.failStreamAfter(2, { code: Code.Unavailable, problem: "unavailable", retryAfterMs: 300 });
    const seen: bigint[] = [];
    for await (const b of client.streamIds({ batchSize: 100, total: 500 })) {
      seen.push(...expandRanges(b.ranges));
    }
    assert.equal(seen.length, 500);
    assert.equal(new Set(seen).size, 500, "no ID twice");
    assert.equal(h.faults.calls.streamIds - before, 2, "the stream was opened twice");
    assert.equal(waits.length, 1);
    assert.ok(waits[0]! >= 300, `waited ${waits[0]} ms, less than the server's RetryInfo of 300 ms`);
  });
});

describe("strict-revision check", () => {
  it("throws StaleRevisionError when a strict namespace's revision goes backwards", async () => {
    const { client } = faulty();
    const first = await client.nextIds({ namespace: h.strictNamespace, count: 2 });
    const second = await client.nextIds({ namespace: h.strictNamespace, count: 2 });
    assert.equal(second.fence?.kind, "revision");
    h.faults.replayNextStrict(); // the next answer is the previous one again
    await assert.rejects(client.nextIds({ namespace: h.strictNamespace, count: 2 }), (e: unknown) => {
      assert.ok(e instanceof StaleRevisionError, `got ${e}`);
      assert.equal(e.namespace, h.strictNamespace);
      if (second.fence?.kind === "revision") {
        assert.equal(e.revision, second.fence.revision);
        assert.equal(e.floor, second.fence.revision);
      }
      assert.equal(e.first, second.ids[0]);
      return true;
    });
    // The check did not move the floor: a fresh answer passes.
    const next = await client.nextIds({ namespace: h.strictNamespace, count: 1 });
    assert.ok(next.ids[0]! > second.ids.at(-1)!);
    assert.ok(first.ids.at(-1)! < second.ids[0]!);
  });

  it("throws StaleRevisionError when a stream repeats a revision", async () => {
    const { client } = faulty();
    h.faults.replayInNextStream();
    let batches = 0;
    await assert.rejects(
      (async () => {
        for await (const _ of client.streamIds({ namespace: h.strictNamespace, batchSize: 5, total: 20 })) {
          batches++;
        }
      })(),
      StaleRevisionError,
    );
    assert.equal(batches, 1, "the repeated batch was not yielded");
  });

  it("does not trip on concurrent calls answered out of order", async () => {
    const c = direct();
    const results = await Promise.all(
      Array.from({ length: 8 }, () => c.nextIds({ namespace: h.strictNamespace, count: 1 })),
    );
    // A node may serve requests that wait together from one fetch, so
    // several answers can carry one revision: none of them is stale.
    const revisions = results.map((r) => (r.fence?.kind === "revision" ? r.fence.revision : -1n));
    assert.ok(revisions.every((r) => r > 0n), `revisions ${revisions.join(", ")}, want each above 0`);
    const ids = results.flatMap((r) => r.ids.map(String));
    assert.equal(new Set(ids).size, 8, "eight calls, eight distinct IDs");
  });
});

describe("retries after HTTP 503 from a proxy in front of idgen", () => {
  for (const protocol of ["connect", "grpc", "grpc-web"] as const) {
    it(`retries NextIds over ${protocol}, waiting the Retry-After`, async () => {
      const waits: number[] = [];
      const c = new IdgenClient({
        baseUrl: h.flaky.url,
        token: h.direct.token,
        protocol,
        random: () => 0.5,
        sleep: async (ms) => {
          waits.push(ms);
        },
      });
      clients.push(c);
      const requests = h.flaky.requests;
      const forwarded = h.flaky.forwarded;
      h.flaky.failNext(1, "2");
      const res = await c.nextIds({ count: 3 });
      assert.equal(res.ids.length, 3);
      assert.equal(res.source, "snowflake");
      assert.equal(h.flaky.requests - requests, 2, "two attempts reached the proxy");
      assert.equal(h.flaky.forwarded - forwarded, 1, "the second one reached idgen");
      assert.equal(waits.length, 1);
      assert.ok(waits[0]! >= 2000, `waited ${waits[0]} ms, less than the proxy's Retry-After of 2 s`);
      // The client asks for no compression: idgen would gzip every answer.
      for (const name of ["accept-encoding", "grpc-accept-encoding", "connect-accept-encoding"]) {
        const v = String(h.flaky.lastHeaders[name] ?? "");
        assert.ok(!/gzip|br/.test(v), `${protocol} request header ${name}: ${v}, want no compression`);
      }
    });
  }

  it("gives up with UNAVAILABLE when every attempt gets 503", async () => {
    const c = new IdgenClient({ baseUrl: h.flaky.url, token: h.direct.token, protocol: "grpc", maxAttempts: 2, sleep: async () => {} });
    clients.push(c);
    h.flaky.failNext(2, "0");
    await assert.rejects(c.nextIds({ count: 1 }), (e: unknown) => {
      assert.ok(e instanceof IdgenError, `got ${e}`);
      assert.equal(e.code, Code.Unavailable);
      assert.equal(e.problem, undefined, "the 503 came from the proxy, not from idgen");
      assert.equal(e.attempts, 2);
      return true;
    });
  });

  it("reopens a stream whose first attempt got 503", async () => {
    const waits: number[] = [];
    const c = new IdgenClient({
      baseUrl: h.flaky.url,
      token: h.direct.token,
      protocol: "grpc",
      sleep: async (ms) => {
        waits.push(ms);
      },
    });
    clients.push(c);
    h.flaky.failNext(1, "1");
    const seen: bigint[] = [];
    for await (const b of c.streamIds({ batchSize: 250, total: 1000 })) {
      seen.push(...expandRanges(b.ranges));
    }
    assert.equal(seen.length, 1000);
    assertIncreasing(seen, "streamed IDs");
    assert.equal(waits.length, 1);
    assert.ok(waits[0]! >= 1000, `waited ${waits[0]} ms, less than the proxy's Retry-After of 1 s`);
  });
});

describe("retries", () => {
  it("retries an UNAVAILABLE, waiting at least the RetryInfo delay", async () => {
    const { client, waits } = faulty();
    const before = h.faults.calls.nextIds;
    h.faults.failNext({ code: Code.Unavailable, problem: "unavailable", retryAfterMs: 1200 });
    const res = await client.nextIds({ count: 2 });
    assert.equal(res.ids.length, 2);
    assert.equal(h.faults.calls.nextIds - before, 2, "two attempts reached the server");
    assert.equal(waits.length, 1);
    assert.ok(waits[0]! >= 1200, `waited ${waits[0]} ms, less than the server's RetryInfo of 1200 ms`);
    assert.ok(waits[0]! < 2000, `waited ${waits[0]} ms: the Retry-After header's whole seconds (2 s) should not win over RetryInfo`);
  });

  it("honours a bare Retry-After header when there is no RetryInfo", async () => {
    const { client, waits } = faulty();
    h.faults.failNext({ code: Code.Unavailable, problem: "unavailable", retryAfterHeader: "3" });
    await client.nextIds({ count: 1 });
    assert.deepEqual(waits, [3000]);
  });

  it("backs off exponentially when the server names no delay", async () => {
    const { client, waits } = faulty({ backoffBaseMs: 100, backoffMaxMs: 1000, maxAttempts: 5 });
    h.faults.failNext(
      { code: Code.Unavailable, problem: "unavailable" },
      { code: Code.Unavailable, problem: "unavailable" },
      { code: Code.Unavailable, problem: "unavailable" },
    );
    await client.nextIds({ count: 1 });
    // random() is 0.5: three quarters of 100, 200, 400.
    assert.deepEqual(waits, [75, 150, 300]);
  });

  it("retries RESOURCE_EXHAUSTED only when it carries RetryInfo", async () => {
    const { client, waits } = faulty();
    h.faults.failNext({ code: Code.ResourceExhausted, problem: "too_many", retryAfterMs: 500 });
    await client.nextIds({ count: 1 });
    assert.equal(waits.length, 1);
    // As connect answers a message over its size limit: no idgen problem code, no delay.
    h.faults.failNext({ code: Code.ResourceExhausted });
    await assert.rejects(client.nextIds({ count: 1 }), (e: unknown) => e instanceof IdgenError && e.attempts === 1);
  });

  it("gives up after maxAttempts with the last error", async () => {
    const { client, waits } = faulty({ maxAttempts: 3 });
    const fault = { code: Code.Unavailable, problem: "unavailable", retryAfterMs: 100 };
    h.faults.failNext(fault, fault, fault);
    await assert.rejects(client.nextIds({ count: 1 }), (e: unknown) => {
      assert.ok(e instanceof IdgenError);
      assert.equal(e.code, Code.Unavailable);
      assert.equal(e.problem, "unavailable");
      assert.equal(e.attempts, 3);
      assert.equal(e.retryAfterMs, 100);
      return true;
    });
    assert.equal(waits.length, 2);
  });

  it("does not wait longer than maxRetryAfterMs", async () => {
    const { client, waits } = faulty({ maxRetryAfterMs: 1000 });
    h.faults.failNext({ code: Code.Unavailable, problem: "unavailable", retryAfterMs: 5000 });
    await assert.rejects(client.nextIds({ count: 1 }), (e: unknown) => e instanceof IdgenError && e.attempts === 1);
    assert.deepEqual(waits, []);
  });

  it("retries with real waits too", async () => {
    // The default sleep, with a short delay: the retry happens after it.
    const c = new IdgenClient({ baseUrl: h.faultyUrl });
    clients.push(c);
    h.faults.failNext({ code: Code.Unavailable, problem: "unavailable", retryAfterMs: 20 });
    const res = await c.nextIds({ count: 1 });
    assert.equal(res.ids.length, 1);
  });
});

async function waitFor(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (cond()) {
      return;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.fail(`timed out waiting until ${what}`);
}
