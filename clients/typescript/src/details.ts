// The two google.rpc error details idgen attaches to its gRPC errors,
// decoded (and encoded, for test servers) from their wire form. The client
// needs only these two small messages, so it reads them with the protobuf
// wire primitives instead of depending on the generated googleapis types.

import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { ConnectError } from "@connectrpc/connect";

/** The type name of google.rpc.RetryInfo. */
export const retryInfoType = "google.rpc.RetryInfo";
/** The type name of google.rpc.ErrorInfo. */
export const errorInfoType = "google.rpc.ErrorInfo";
/** The domain of the ErrorInfo of idgen's errors. */
export const idgenDomain = "idgen.dev";

/** The parts of a google.rpc.ErrorInfo that idgen uses. */
export interface ErrorInfo {
  /** idgen's problem code in upper case, for example "NAMESPACE_EXHAUSTED". */
  reason: string;
  /** "idgen.dev" for idgen's own errors. */
  domain: string;
}

/** A detail as it arrives on the wire: a type name and the encoded message. */
interface RawDetail {
  type: string;
  value: Uint8Array;
}

function rawDetails(err: ConnectError): RawDetail[] {
  const out: RawDetail[] = [];
  for (const d of err.details) {
    if ("type" in d && d.value instanceof Uint8Array) {
      out.push({ type: d.type, value: d.value });
    }
  }
  return out;
}

/**
 * Returns the delay of the google.rpc.RetryInfo that err carries, in
 * milliseconds (rounded up), or undefined when it carries none.
 */
export function retryInfoDelayMs(err: ConnectError): number | undefined {
  for (const d of rawDetails(err)) {
    if (d.type !== retryInfoType) {
      continue;
    }
    try {
      return decodeRetryInfo(d.value);
    } catch {
      // A malformed detail is ignored, as if it were absent.
    }
  }
  return undefined;
}

/** Returns idgen's ErrorInfo of err, or undefined when it carries none. */
export function idgenErrorInfo(err: ConnectError): ErrorInfo | undefined {
  for (const d of rawDetails(err)) {
    if (d.type !== errorInfoType) {
      continue;
    }
    try {
      const info = decodeErrorInfo(d.value);
      if (info.domain === idgenDomain) {
        return info;
      }
    } catch {
      // ignored, as above
    }
  }
  return undefined;
}

// RetryInfo { google.protobuf.Duration retry_delay = 1; }
// Duration { int64 seconds = 1; int32 nanos = 2; }
function decodeRetryInfo(bytes: Uint8Array): number | undefined {
  const r = new BinaryReader(bytes);
  let delay: number | undefined;
  while (r.pos < r.len) {
    const [field, wt] = r.tag();
    if (field === 1 && wt === WireType.LengthDelimited) {
      const d = new BinaryReader(r.bytes());
      let seconds = 0n;
      let nanos = 0;
      while (d.pos < d.len) {
        const [f, w] = d.tag();
        if (f === 1 && w === WireType.Varint) {
          seconds = BigInt(d.int64());
        } else if (f === 2 && w === WireType.Varint) {
          nanos = d.int32();
        } else {
          d.skip(w);
        }
      }
      if (seconds < 0n || nanos < 0) {
        return undefined;
      }
      delay = Number(seconds) * 1000 + Math.ceil(nanos / 1e6);
    } else {
      r.skip(wt);
    }
  }
  return delay;
}

// ErrorInfo { string reason = 1; string domain = 2; map<string, string> metadata = 3; }
function decodeErrorInfo(bytes: Uint8Array): ErrorInfo {
  const r = new BinaryReader(bytes);
  const info: ErrorInfo = { reason: "", domain: "" };
  while (r.pos < r.len) {
    const [field, wt] = r.tag();
    if (field === 1 && wt === WireType.LengthDelimited) {
      info.reason = r.string();
    } else if (field === 2 && wt === WireType.LengthDelimited) {
      info.domain = r.string();
    } else {
      r.skip(wt);
    }
  }
  return info;
}

/**
 * Encodes a google.rpc.RetryInfo of delayMs milliseconds as an error
 * detail, for servers (and test doubles) that answer as idgen does.
 */
export function retryInfoDetail(delayMs: number): RawDetail {
  const ms = Math.max(0, Math.ceil(delayMs));
  const w = new BinaryWriter();
  w.tag(1, WireType.LengthDelimited).fork();
  w.tag(1, WireType.Varint).int64(Math.floor(ms / 1000));
  if (ms % 1000 !== 0) {
    w.tag(2, WireType.Varint).int32((ms % 1000) * 1e6);
  }
  w.join();
  return { type: retryInfoType, value: w.finish() };
}

/**
 * Encodes idgen's google.rpc.ErrorInfo for a problem code (such as
 * "unavailable") as an error detail.
 */
export function errorInfoDetail(problem: string): RawDetail {
  const w = new BinaryWriter();
  w.tag(1, WireType.LengthDelimited).string(problem.toUpperCase());
  w.tag(2, WireType.LengthDelimited).string(idgenDomain);
  return { type: errorInfoType, value: w.finish() };
}
