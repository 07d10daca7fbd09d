import type { DescMessage, DescMethodStreaming, DescMethodUnary, MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues, type StreamResponse, type Transport, type UnaryResponse } from "@connectrpc/connect";

/** The headers a transport takes (the DOM's HeadersInit, which Node types lack here). */
type Header = Parameters<Transport["unary"]>[3];

/**
 * Whether an error moves a client of several nodes on to the next: no
 * answer (a refused or broken connection) or a 503, which both arrive as
 * UNAVAILABLE (a node that cannot prove its lease, or that drains before
 * it stops).
 */
export function failsOver(err: ConnectError): boolean {
  return err.code === Code.Unavailable;
}

/**
 * A transport over several idgen nodes, for callers with no load balancer
 * in front of them: every call goes to one node, the first at the start.
 * A unary call that fails with UNAVAILABLE moves on to the next node, round,
 * and is sent there at once, until every node was tried once in the call;
 * its last error goes to the client, whose retries (with backoff) follow.
 * A stream that fails so moves on too, and the client's reopening goes to
 * the next node. Sending an ID call to another node is always safe: an
 * answer lost on the way only leaves a gap in the IDs.
 */
export class FailoverTransport implements Transport {
  readonly #nodes: readonly Transport[];
  #current = 0;

  constructor(nodes: readonly Transport[]) {
    if (nodes.length === 0) {
      throw new RangeError("idgen client: no node to send to");
    }
    this.#nodes = nodes;
  }

  /** The index of the node calls go to now. */
  get current(): number {
    return this.#current;
  }

  /** Moves on from node i, unless another call already did. */
  #failed(i: number): void {
    if (this.#current === i) {
      this.#current = (i + 1) % this.#nodes.length;
    }
  }

  async unary<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: Header,
    input: MessageInitShape<I>,
    contextValues?: ContextValues,
  ): Promise<UnaryResponse<I, O>> {
    for (let moves = 0; ; moves++) {
      const i = this.#current;
      try {
        return await this.#nodes[i]!.unary(method, signal, timeoutMs, header, input, contextValues);
      } catch (e) {
        if (signal?.aborted || !failsOver(ConnectError.from(e))) {
          throw e;
        }
        this.#failed(i);
        if (moves >= this.#nodes.length - 1) {
          throw e;
        }
      }
    }
  }

  async stream<I extends DescMessage, O extends DescMessage>(
    method: DescMethodStreaming<I, O>,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: Header,
    input: AsyncIterable<MessageInitShape<I>>,
    contextValues?: ContextValues,
  ): Promise<StreamResponse<I, O>> {
    const i = this.#current;
    const moveOn = (e: unknown): never => {
      if (!signal?.aborted && failsOver(ConnectError.from(e))) {
        this.#failed(i);
      }
      throw e;
    };
    let res: StreamResponse<I, O>;
    try {
      res = await this.#nodes[i]!.stream(method, signal, timeoutMs, header, input, contextValues);
    } catch (e) {
      return moveOn(e);
    }
    const messages = res.message;
    async function* watched() {
      try {
        yield* messages;
      } catch (e) {
        moveOn(e);
      }
    }
    return { ...res, message: watched() };
  }
}
