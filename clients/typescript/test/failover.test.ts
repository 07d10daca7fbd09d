// The client over several nodes (baseUrls): it moves on past a node that
// refuses connections or answers 503, at once, and keeps to the node that
// answered.

import assert from "node:assert/strict";
import { createServer, type AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";

import { IdgenClient, IdgenError, type ClientOptions } from "../src/index.js";
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

/** The URL of a loopback port nobody listens on any more: a node killed. */
async function deadUrl(): Promise<string> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

function client(options: ClientOptions): { client: IdgenClient; waits: number[] } {
  const waits: number[] = [];
  const c = new IdgenClient({
    token: h.direct.token,
    random: () => 0.5,
    sleep: async (ms) => {
      waits.push(ms);
    },
    ...options,
  });
  clients.push(c);
  return { client: c, waits };
}

describe("baseUrls", () => {
  it("moves on past a dead node and a 503 without waiting, then stays", async () => {
    const { client: c, waits } = client({ baseUrls: [await deadUrl(), h.flaky.url, h.direct.url] });
    h.flaky.failNext(1, "30");
    const requests = h.flaky.requests;
    const res = await c.nextIds({ count: 3 });
    assert.equal(res.ids.length, 3);
    assert.deepEqual(waits, [], "no wait before moving on");
    assert.equal(h.flaky.requests - requests, 1, "the 503 node was asked once");
    await c.nextIds({ count: 1 });
    assert.equal(h.flaky.requests - requests, 1, "the next call went to the node that answered");
  });

  it("retries with backoff once every node failed in an attempt", async () => {
    const { client: c, waits } = client({ baseUrls: [await deadUrl(), await deadUrl()], maxAttempts: 3 });
    await assert.rejects(c.nextIds({ count: 1 }), (e: unknown) => e instanceof IdgenError);
    assert.equal(waits.length, 2, `waits ${JSON.stringify(waits)}: want one before each of the 2 retries`);
  });

  it("reopens a stream on the next node when the first does not answer", async () => {
    const { client: c, waits } = client({ baseUrls: [await deadUrl(), h.direct.url] });
    let received = 0n;
    for await (const batch of c.streamIds({ batchSize: 50, total: 200 })) {
      received += batch.count;
    }
    assert.equal(received, 200n);
    assert.equal(waits.length, 1, `waits ${JSON.stringify(waits)}: want the one backoff before the stream was reopened`);
  });

  it("takes baseUrl or a non-empty baseUrls, not both", () => {
    for (const bad of [{}, { baseUrls: [] }, { baseUrl: h.direct.url, baseUrls: [h.direct.url] }] as ClientOptions[]) {
      assert.throws(() => new IdgenClient(bad), RangeError, JSON.stringify(bad));
    }
  });
});
