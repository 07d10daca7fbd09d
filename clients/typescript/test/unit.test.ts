// The client's pure parts: ranges, IDs, backoff, revisions, error details.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Code, ConnectError } from "@connectrpc/connect";

import {
  IdgenError,
  RevisionTracker,
  StaleRevisionError,
  backoffMs,
  countIds,
  errorInfoDetail,
  expandRanges,
  idgenErrorInfo,
  maxId,
  parseId,
  problemInfo,
  problems,
  retryInfoDelayMs,
  retryInfoDetail,
  retryable,
} from "../src/index.js";

describe("ranges", () => {
  it("expands ranges in order, both ends included", () => {
    const r = [
      { first: 5n, last: 7n },
      { first: 10n, last: 10n },
    ];
    assert.deepEqual([...expandRanges(r)], [5n, 6n, 7n, 10n]);
    assert.equal(countIds(r), 4n);
  });

  it("expands a range that ends at the largest ID", () => {
    const r = [{ first: maxId - 2n, last: maxId }];
    assert.deepEqual([...expandRanges(r)], [maxId - 2n, maxId - 1n, maxId]);
    assert.equal(maxId, 9223372036854775807n);
  });
});

describe("parseId", () => {
  for (const [input, want] of [
    ["0", 0n],
    ["9223372036854775807", maxId],
    [42n, 42n],
  ] as const) {
    it(`accepts ${String(input)}`, () => {
      assert.equal(parseId(input), want);
    });
  }
  for (const bad of ["", "-1", "+1", "1e3", " 1", "0x10", "9223372036854775808", "99999999999999999999", -1n, 1n << 63n]) {
    it(`refuses ${JSON.stringify(String(bad))}`, () => {
      assert.throws(() => parseId(bad), RangeError);
    });
  }
  it("refuses a JavaScript number", () => {
    assert.throws(() => parseId(1 as unknown as string), RangeError);
  });
});

describe("backoffMs", () => {
  it("stays between half and all of the doubling bound, capped", () => {
    for (const [retry, bound] of [
      [1, 50],
      [2, 100],
      [3, 200],
      [7, 2000],
      [60, 2000],
    ] as const) {
      assert.equal(backoffMs(retry, 50, 2000, () => 0), bound / 2, `retry ${retry}, lowest`);
      assert.equal(backoffMs(retry, 50, 2000, () => 1), bound, `retry ${retry}, highest`);
    }
  });
});

describe("RevisionTracker", () => {
  it("accepts growing revisions and refuses one at or below the floor", () => {
    const t = new RevisionTracker();
    assert.equal(t.floor("inv"), -1n);
    t.check("inv", t.floor("inv"), 5n);
    assert.equal(t.floor("inv"), 5n);
    assert.throws(() => t.check("inv", t.floor("inv"), 5n), StaleRevisionError);
    assert.throws(() => t.check("inv", t.floor("inv"), 4n), StaleRevisionError);
    assert.equal(t.floor("inv"), 5n, "a refused revision does not move the floor");
    t.check("inv", t.floor("inv"), 9n);
    assert.equal(t.floor("other"), -1n, "namespaces are apart");
  });

  it("judges each answer by the floor its request took, so concurrent answers may come in any order", () => {
    const t = new RevisionTracker();
    t.check("inv", -1n, 1n);
    const floorA = t.floor("inv"); // two requests sent now
    const floorB = t.floor("inv");
    t.check("inv", floorB, 3n); // B's answer comes first
    t.check("inv", floorA, 2n); // A's fetch came earlier: fine
    assert.equal(t.floor("inv"), 3n);
    assert.throws(() => t.check("inv", t.floor("inv"), 2n), StaleRevisionError);
  });
});

describe("error details", () => {
  function withDetails(code: Code, ...details: { type: string; value: Uint8Array }[]): ConnectError {
    const e = new ConnectError("x", code);
    e.details.push(...details);
    return e;
  }

  it("round-trips RetryInfo delays", () => {
    for (const ms of [0, 1, 999, 1000, 1500, 61_000]) {
      assert.equal(retryInfoDelayMs(withDetails(Code.Unavailable, retryInfoDetail(ms))), ms);
    }
    assert.equal(retryInfoDelayMs(withDetails(Code.Unavailable)), undefined);
  });

  it("reads idgen's ErrorInfo and ignores other domains and malformed bytes", () => {
    const e = withDetails(Code.FailedPrecondition, errorInfoDetail("namespace_exhausted"));
    assert.deepEqual(idgenErrorInfo(e), { reason: "NAMESPACE_EXHAUSTED", domain: "idgen.dev" });
    assert.equal(new IdgenError(e, 1, "NextIds").problem, "namespace_exhausted");
    const junk = withDetails(Code.Unavailable, { type: "google.rpc.ErrorInfo", value: new Uint8Array([0xff, 0xff]) });
    assert.equal(idgenErrorInfo(junk), undefined);
    assert.equal(new IdgenError(junk, 1, "NextIds").problem, undefined);
  });

  it("prefers RetryInfo over Retry-After, and takes Retry-After alone", () => {
    const both = withDetails(Code.Unavailable, retryInfoDetail(1500));
    both.metadata.set("Retry-After", "2");
    assert.equal(new IdgenError(both, 1, "NextIds").retryAfterMs, 1500);
    const header = withDetails(Code.Unavailable);
    header.metadata.set("Retry-After", "4");
    assert.equal(new IdgenError(header, 1, "NextIds").retryAfterMs, 4000);
    const date = withDetails(Code.Unavailable);
    date.metadata.set("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT");
    assert.equal(new IdgenError(date, 1, "NextIds").retryAfterMs, undefined);
  });
});

describe("retryable", () => {
  const cases: [string, ConnectError, boolean][] = [
    ["UNAVAILABLE", new ConnectError("x", Code.Unavailable), true],
    ["INVALID_ARGUMENT", new ConnectError("x", Code.InvalidArgument), false],
    ["NOT_FOUND", new ConnectError("x", Code.NotFound), false],
    ["RESOURCE_EXHAUSTED without RetryInfo", new ConnectError("x", Code.ResourceExhausted), false],
    ["a reset connection (ABORTED, not idgen's)", new ConnectError("x", Code.Aborted), true],
    ["an attempt over its timeout", new ConnectError("x", Code.DeadlineExceeded), true],
    ["CANCELED", new ConnectError("x", Code.Canceled), false],
  ];
  const exhausted = new ConnectError("x", Code.ResourceExhausted);
  exhausted.details.push(retryInfoDetail(100));
  cases.push(["RESOURCE_EXHAUSTED with RetryInfo", exhausted, true]);
  const lost = new ConnectError("x", Code.Aborted);
  lost.details.push(errorInfoDetail("lease_lost"));
  cases.push(["idgen's lease_lost (ABORTED)", lost, false]);
  for (const [name, err, want] of cases) {
    it(`${name}: ${want}`, () => {
      assert.equal(retryable(err), want);
    });
  }
  // idgen's table (src/codes.ts, generated from the Go core's idgen.Codes())
  // decides for every code of idgen, with or without a RetryInfo.
  for (const [problem, row] of Object.entries(problems)) {
    it(`idgen's ${problem}: ${row.retryLater}, as its row says`, () => {
      const e = new ConnectError("x", row.grpc);
      e.details.push(errorInfoDetail(problem));
      assert.equal(retryable(e), row.retryLater);
      assert.equal(new IdgenError(e, 1, "NextIds").problem, problem);
      assert.equal(problemInfo(problem), row);
    });
  }
  it("a code of idgen the table lacks: by the gRPC code", () => {
    const e = new ConnectError("x", Code.Unavailable);
    e.details.push(errorInfoDetail("newer_code"));
    assert.equal(problemInfo("newer_code"), undefined);
    assert.equal(problemInfo("toString"), undefined);
    assert.equal(retryable(e), true);
  });
});
