/**
 * The text forms of an ID, as idgen writes and reads them: decimal, and the
 * fixed-width forms Crockford base32, base62 and hex. A fixed-width form
 * pads every ID of one width (the layout's for Snowflake IDs: 63 bits by
 * default, 53 for the js53 layout; 63 bits for a namespace's IDs) to the
 * same length from an alphabet in ASCII order, so that comparing the
 * strings compares the IDs.
 *
 * The same rules as the Go package snowflake (format.go); both pass the
 * vectors of clients/testvectors/forms.json.
 */

/** A text form of an ID. */
export type IdFormat = "decimal" | "base32" | "base62" | "hex";

/** The forms, in the order of the proto's IdFormat (1 to 4). */
export const idFormats: readonly IdFormat[] = ["decimal", "base32", "base62", "hex"];

const alphabets: Record<Exclude<IdFormat, "decimal">, string> = {
  base32: "0123456789ABCDEFGHJKMNPQRSTVWXYZ",
  base62: "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
  hex: "0123456789abcdef",
};

function checkWidth(width: number): void {
  if (!Number.isInteger(width) || width < 1 || width > 63) {
    throw new RangeError(`idgen: ID width ${width} is not from 1 to 63`);
  }
}

/** The number of characters format writes for IDs of width bits; 0 for decimal, whose length varies. */
export function formatWidth(format: IdFormat, width = 63): number {
  checkWidth(width);
  if (format === "decimal") {
    return 0;
  }
  const base = BigInt(alphabets[format].length);
  let n = 1;
  for (let v = (1n << BigInt(width)) - 1n; v >= base; v /= base) {
    n++;
  }
  return n;
}

/** Writes id, from 0 to 2^width - 1, in format. Throws a RangeError for an ID outside that range. */
export function encodeId(id: bigint, format: IdFormat, width = 63): string {
  checkWidth(width);
  if (typeof id !== "bigint" || id < 0n || id >= 1n << BigInt(width)) {
    throw new RangeError(`idgen: ${String(id)} is no ID of ${width} bits`);
  }
  if (format === "decimal") {
    return id.toString(10);
  }
  const digits = alphabets[format];
  const base = BigInt(digits.length);
  let out = "";
  for (let v = id; v > 0n; v /= base) {
    out = digits[Number(v % base)]! + out;
  }
  return out.padStart(formatWidth(format, width), "0");
}

/** The value of character c in format, or -1. Crockford base32 reads either case, I and L as 1, O as 0; hex either case. */
function digitValue(c: string, format: Exclude<IdFormat, "decimal">): number {
  if (format === "base32") {
    c = c.toUpperCase();
    if (c === "I" || c === "L") {
      return 1;
    }
    if (c === "O") {
      return 0;
    }
  } else if (format === "hex") {
    c = c.toLowerCase();
  }
  return c.length === 1 ? alphabets[format].indexOf(c) : -1;
}

function invalid(text: string, why: string): RangeError {
  return new RangeError(`idgen: ${JSON.stringify(text.slice(0, 32))} is not an ID: ${why}`);
}

/**
 * Reads text as an ID of width bits in format, or, with "any", in the form
 * its characters and length name: digits only are decimal, else the one
 * fixed-width form whose alphabet and length match (name the format to read
 * a base32, base62 or hex form that holds digits only). Throws a RangeError
 * for anything else and for values above 2^width - 1.
 */
export function decodeId(text: string, format: IdFormat | "any" = "any", width = 63): bigint {
  checkWidth(width);
  const max = (1n << BigInt(width)) - 1n;
  if (typeof text !== "string") {
    throw new RangeError("idgen: an ID's text must be a string");
  }
  if (format === "any") {
    if (/^[0-9]+$/.test(text)) {
      format = "decimal";
    } else {
      const found = (["base32", "base62", "hex"] as const).filter(
        (f) => text.length === formatWidth(f, width) && [...text].every((c) => digitValue(c, f) >= 0),
      );
      if (found.length !== 1) {
        throw invalid(text, found.length === 0 ? `none of decimal, base32, base62 or hex for ${width} bits` : `could be ${found.join(" or ")}: name its format`);
      }
      format = found[0]!;
    }
  }
  let v = 0n;
  if (format === "decimal") {
    if (!/^[0-9]{1,19}$/.test(text)) {
      throw invalid(text, "not 1 to 19 decimal digits");
    }
    v = BigInt(text);
  } else {
    const want = formatWidth(format, width);
    if (text.length !== want) {
      throw invalid(text, `${format} IDs of ${width} bits have ${want} characters`);
    }
    const base = BigInt(alphabets[format].length);
    for (const c of text) {
      const d = digitValue(c, format);
      if (d < 0) {
        throw invalid(text, `${JSON.stringify(c)} is not a ${format} digit`);
      }
      v = v * base + BigInt(d);
    }
  }
  if (v > max) {
    throw invalid(text, `above ${max}, the largest ID of ${width} bits`);
  }
  return v;
}

/** A Snowflake layout: bit widths and the epoch in Unix milliseconds. */
export interface Layout {
  timeBits: number;
  datacenterBits: number;
  workerBits: number;
  sequenceBits: number;
  epochMs: bigint;
}

/** The smallest and largest Snowflake ID of one millisecond. */
export interface Bounds {
  /** The millisecond. */
  time: Date;
  first: bigint;
  last: bigint;
}

/**
 * The smallest and the largest ID whose timestamp is the millisecond of
 * time under layout (every other part zero, and at its maximum), computed
 * locally as IdgenClient.compose asks a node. Throws a RangeError for a time
 * before the epoch or past the layout's end.
 */
export function composeBounds(layout: Layout, time: Date | bigint): Bounds {
  const ms = typeof time === "bigint" ? time : BigInt(time.getTime());
  const ts = ms - layout.epochMs;
  if (ts < 0n || ts >= 1n << BigInt(layout.timeBits)) {
    throw new RangeError(`idgen: time ${ms} ms lies outside the layout's range`);
  }
  const shift = BigInt(layout.datacenterBits + layout.workerBits + layout.sequenceBits);
  const first = ts << shift;
  return { time: new Date(Number(ms)), first, last: first | ((1n << shift) - 1n) };
}
