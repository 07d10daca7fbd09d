/** A run of consecutive IDs, first to last, both included. */
export interface IdRange {
  first: bigint;
  last: bigint;
}

/** The largest ID: 2^63 - 1. */
export const maxId = (1n << 63n) - 1n;

/**
 * Yields every ID of the ranges, in order. It counts from first rather than
 * comparing with last + 1, so a range ending at 2^63 - 1 needs no care in
 * any language; with bigint, none is needed anyway.
 */
export function* expandRanges(ranges: Iterable<IdRange>): Generator<bigint, void, undefined> {
  for (const r of ranges) {
    const n = r.last - r.first;
    for (let i = 0n; i <= n; i++) {
      yield r.first + i;
    }
  }
}

/** The number of IDs in the ranges. */
export function countIds(ranges: Iterable<IdRange>): bigint {
  let n = 0n;
  for (const r of ranges) {
    n += r.last - r.first + 1n;
  }
  return n;
}

/**
 * Parses an ID given as a bigint or a string of decimal digits, as idgen's
 * HTTP API writes them. Throws a RangeError for anything else, or for a
 * value outside 0 .. 2^63 - 1. IDs are never JavaScript numbers: those lose
 * precision above 2^53.
 */
export function parseId(id: bigint | string): bigint {
  let v: bigint;
  if (typeof id === "bigint") {
    v = id;
  } else if (typeof id === "string" && /^[0-9]{1,19}$/.test(id)) {
    v = BigInt(id);
  } else {
    throw new RangeError(`idgen: ${JSON.stringify(String(id)).slice(0, 40)} is not an ID: a bigint or a string of decimal digits`);
  }
  if (v < 0n || v > maxId) {
    throw new RangeError(`idgen: ${v} is not an ID: IDs go from 0 to ${maxId}`);
  }
  return v;
}
