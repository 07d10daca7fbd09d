// The ID forms and compose: the shared vectors of clients/testvectors
// (which the Go tests read too), properties over random IDs, and the
// server's answers.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";

import { composeBounds, decodeId, encodeId, formatWidth, idFormats, type IdFormat, type Layout } from "../src/index.js";

interface Vectors {
  layouts: Record<string, { time: number; datacenter: number; worker: number; sequence: number; epoch_ms: number }>;
  ids: { width: number; id: string; decimal: string; base32: string; base62: string; hex: string }[];
  invalid: { width: number; format: string; text: string }[];
  compose: { layout: string; time: string; first?: string; last?: string; error?: string }[];
}

// dist/test/forms.test.js -> clients/testvectors/forms.json
const vectors = JSON.parse(readFileSync(new URL("../../../testvectors/forms.json", import.meta.url), "utf8")) as Vectors;

function layoutOf(name: string): Layout {
  const l = vectors.layouts[name];
  assert.ok(l, `layout ${name} in forms.json`);
  return { timeBits: l.time, datacenterBits: l.datacenter, workerBits: l.worker, sequenceBits: l.sequence, epochMs: BigInt(l.epoch_ms) };
}

describe("shared vectors", () => {
  it("encodes and decodes every ID of forms.json in every form", () => {
    assert.ok(vectors.ids.length > 0);
    for (const v of vectors.ids) {
      const id = BigInt(v.id);
      for (const f of idFormats) {
        assert.equal(encodeId(id, f, v.width), v[f], `encodeId(${id}, ${f}, ${v.width})`);
        assert.equal(decodeId(v[f], f, v.width), id, `decodeId(${v[f]}, ${f}, ${v.width})`);
        if (!/^[0-9]+$/.test(v[f])) {
          assert.equal(decodeId(v[f], "any", v.width), id, `decodeId(${v[f]}, any, ${v.width})`);
        }
      }
    }
  });

  it("refuses every invalid string of forms.json", () => {
    assert.ok(vectors.invalid.length > 0);
    for (const v of vectors.invalid) {
      const f = (v.format === "" ? "any" : v.format) as IdFormat | "any";
      assert.throws(() => decodeId(v.text, f, v.width), RangeError, `decodeId(${JSON.stringify(v.text)}, ${f}, ${v.width})`);
    }
  });

  it("composes the bounds of forms.json for every preset", () => {
    assert.ok(vectors.compose.length > 0);
    for (const v of vectors.compose) {
      const l = layoutOf(v.layout);
      const t = new Date(v.time);
      if (v.error !== undefined) {
        assert.throws(() => composeBounds(l, t), RangeError, `${v.layout} ${v.time}`);
        continue;
      }
      const b = composeBounds(l, t);
      assert.equal(b.first, BigInt(v.first!), `${v.layout} ${v.time} first`);
      assert.equal(b.last, BigInt(v.last!), `${v.layout} ${v.time} last`);
    }
  });
});

/** A deterministic generator (xorshift64*), so that a failure repeats. */
function rng(seed: bigint): () => bigint {
  let s = seed;
  return () => {
    s ^= s >> 12n;
    s ^= (s << 25n) & 0xffffffffffffffffn;
    s ^= s >> 27n;
    return (s * 0x2545f4914f6cdd1dn) & 0xffffffffffffffffn;
  };
}

describe("properties", () => {
  it("round-trips and keeps numeric order in every fixed-width form, at every width", () => {
    const next = rng(20261127n);
    for (let width = 31; width <= 63; width++) {
      const max = (1n << BigInt(width)) - 1n;
      const ids = [0n, 1n, max, max - 1n];
      for (let i = 0; i < 40; i++) {
        ids.push(next() & max);
      }
      for (const f of ["base32", "base62", "hex"] as const) {
        const texts = ids.map((id) => encodeId(id, f, width));
        texts.forEach((t, i) => {
          assert.equal(t.length, formatWidth(f, width), `${f} width ${width}: ${t}`);
          assert.equal(decodeId(t, f, width), ids[i]);
        });
        for (let i = 1; i < ids.length; i++) {
          const a = ids[i - 1]!;
          const b = ids[i]!;
          const sa = texts[i - 1]!;
          const sb = texts[i]!;
          assert.equal(sa < sb, a < b, `${f} width ${width}: ${a} vs ${b} as ${sa} vs ${sb}`);
        }
      }
    }
  });

  it("never lets a js53 layout exceed Number.MAX_SAFE_INTEGER", () => {
    const l = layoutOf("js53");
    const end = l.epochMs + (1n << BigInt(l.timeBits));
    const lastMs = composeBounds(l, end - 1n);
    assert.equal(lastMs.last, BigInt(Number.MAX_SAFE_INTEGER));
    assert.ok(Number.isSafeInteger(Number(lastMs.last)));
    assert.throws(() => composeBounds(l, end), RangeError);
  });

  it("refuses out-of-range IDs when encoding", () => {
    assert.throws(() => encodeId(1n << 53n, "base32", 53), RangeError);
    assert.throws(() => encodeId(-1n, "hex"), RangeError);
    assert.throws(() => formatWidth("hex", 64), RangeError);
  });
});
