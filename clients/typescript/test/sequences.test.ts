// SequenceClient against idgen serve (started by idgen.ts): reserve,
// confirm and void, with the core's refusals.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { IdgenError, SequenceClient } from "../src/index.js";
import { startIdgen, type IdgenProcess } from "./idgen.js";

describe("SequenceClient", () => {
  let idgen: IdgenProcess;

  before(async () => {
    idgen = await startIdgen();
    const created = await fetch(`${idgen.url}/v1/sequences`, {
      method: "POST",
      headers: { Authorization: `Bearer ${idgen.adminToken}`, "Content-Type": "application/json" },
      body: JSON.stringify({ name: "ts-invoices", format: "TS-{yyyy}-{seq:05}", reset: "yearly", time_zone: "Europe/Berlin" }),
    });
    assert.equal(created.status, 201, await created.text());
  });

  after(async () => {
    await idgen.stop();
  });

  it("reserves, confirms, and refuses a second settlement", async () => {
    const c = new SequenceClient({ baseUrl: idgen.url, token: idgen.token });
    const r = await c.reserve("ts-invoices", 2);
    assert.deepEqual(r.numbers, [1n, 2n]);
    assert.equal(r.formatted[1], `TS-${r.period}-00002`);
    assert.equal(r.caller, "ts-client");
    assert.equal(r.state, "reserved");
    assert.ok(r.expiresAt > r.reservedAt);

    const confirmed = await c.confirm("ts-invoices", r.reservationId);
    assert.equal(confirmed.state, "confirmed");
    await assert.rejects(c.void("ts-invoices", r.reservationId), (e: unknown) => e instanceof IdgenError && e.problem === "conflict");

    const next = await c.reserve("ts-invoices", 1);
    assert.deepEqual(next.numbers, [3n]);
    const voided = await c.void("ts-invoices", next.reservationId);
    assert.equal(voided.state, "voided");
  });

  it("refuses bad input with the core's codes", async () => {
    const c = new SequenceClient({ baseUrl: idgen.url, token: idgen.token });
    await assert.rejects(c.reserve("ts-invoices", 100000), (e: unknown) => e instanceof IdgenError && e.problem === "invalid");
    await assert.rejects(c.reserve("nope", 1), (e: unknown) => e instanceof IdgenError && e.problem === "not_found");
    await assert.rejects(c.ledger("ts-invoices"), (e: unknown) => e instanceof IdgenError && e.problem === "forbidden");
    const admin = new SequenceClient({ baseUrl: idgen.url, token: idgen.adminToken });
    const page = await admin.ledger("ts-invoices");
    assert.deepEqual(
      page.entries.map((e) => `${e.number}:${e.state}`),
      ["1:confirmed", "2:confirmed", "3:voided"],
    );
  });
});
