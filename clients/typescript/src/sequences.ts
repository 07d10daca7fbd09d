import { ConnectError, createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";

import { IdgenError } from "./errors.js";
import { SequenceService, type LedgerEntry, type Reservation as WireReservation } from "./gen/idgen/v1/sequence_pb.js";

/** Options of a SequenceClient. */
export interface SequenceClientOptions {
  /** The idgen node or load balancer, for example "http://127.0.0.1:8080". */
  baseUrl: string;
  /** A token of the caller, sent as "Authorization: Bearer <token>". */
  token?: string;
  /** A transport of your own; replaces baseUrl and token. */
  transport?: Transport;
}

/** A block of a sequence's numbers reserved for the caller (docs/sequences.md). */
export interface Reservation {
  reservationId: string;
  sequence: string;
  period: string;
  /** The numbers, consecutive. */
  numbers: bigint[];
  /** The numbers as the sequence's format writes them, in order. */
  formatted: string[];
  /** "reserved", "confirmed", "voided" or "expired". */
  state: string;
  caller: string;
  requestId: string;
  reservedAt: Date;
  expiresAt: Date;
}

function toReservation(r: WireReservation | undefined): Reservation {
  if (r === undefined) {
    throw new Error("idgen: the server answered no reservation");
  }
  return {
    reservationId: r.reservationId,
    sequence: r.sequence,
    period: r.period,
    numbers: [...r.numbers],
    formatted: [...r.formatted],
    state: r.state,
    caller: r.caller,
    requestId: r.requestId,
    reservedAt: new Date(Number(r.reservedAtMs)),
    expiresAt: new Date(Number(r.expiresAtMs)),
  };
}

/**
 * The sequence API of idgen (SequenceService): reserve numbers, then
 * confirm or void them. No call is retried: a reservation whose answer is
 * lost is in the server's ledger and expires; a confirmation or void the
 * server applied is refused when sent again (problem "conflict").
 * Refusals are IdgenError with the core's problem code: "forbidden" for
 * another caller's reservation, "conflict" for one settled or expired,
 * "invalid" for a count above the server's cap.
 */
export class SequenceClient {
  readonly #client: Client<typeof SequenceService>;

  constructor(options: SequenceClientOptions) {
    let transport = options.transport;
    if (transport === undefined) {
      const interceptors: Interceptor[] = [];
      if (options.token !== undefined) {
        const auth = `Bearer ${options.token}`;
        interceptors.push((next) => (req) => {
          req.header.set("Authorization", auth);
          return next(req);
        });
      }
      transport = createConnectTransport({ baseUrl: options.baseUrl, httpVersion: "1.1", interceptors });
    }
    this.#client = createClient(SequenceService, transport);
  }

  /** Reserves count consecutive numbers of sequence. */
  async reserve(sequence: string, count: number): Promise<Reservation> {
    if (!Number.isInteger(count) || count < 1) {
      throw new RangeError(`idgen: count must be a positive integer, got ${count}`);
    }
    const res = await call("reserve", () => this.#client.reserveNumbers({ sequence, count }));
    return toReservation(res.reservation);
  }

  /** Records the numbers of a reservation as used. */
  async confirm(sequence: string, reservationId: string): Promise<Reservation> {
    const res = await call("confirm", () => this.#client.confirmReservation({ sequence, reservationId }));
    return toReservation(res.reservation);
  }

  /** Records the numbers of a reservation as not used; they are never handed out again. */
  async void(sequence: string, reservationId: string): Promise<Reservation> {
    const res = await call("void", () => this.#client.voidReservation({ sequence, reservationId }));
    return toReservation(res.reservation);
  }

  /** Returns a page of the ledger (needs a token of the admin scope). */
  async ledger(
    sequence: string,
    filter: { period?: string; state?: string; reservationId?: string; caller?: string; limit?: number; afterPeriod?: string; afterNumber?: bigint } = {},
  ): Promise<{ entries: LedgerEntry[]; more: boolean }> {
    const res = await call("ledger", () => this.#client.getLedger({ sequence, ...filter }));
    return { entries: res.entries, more: res.more };
  }
}

async function call<T>(op: string, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    throw new IdgenError(ConnectError.from(e), 1, op);
  }
}
