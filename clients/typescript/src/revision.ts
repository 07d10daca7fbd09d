import { StaleRevisionError } from "./errors.js";

/**
 * RevisionTracker keeps the highest revision received per strict namespace
 * and checks that revisions never go backwards.
 *
 * The check is causal, so that concurrent calls do not trip it: a request
 * takes the highest revision received *before it was sent* as its floor
 * (`floor`), and its response must carry a revision above that floor
 * (`check`). Two requests in flight at once may be answered in either order;
 * a request sent after an answer was received must see a later fetch.
 */
export class RevisionTracker {
  readonly #highest = new Map<string, bigint>();

  /** The highest revision received for namespace, or -1 when none. */
  floor(namespace: string): bigint {
    return this.#highest.get(namespace) ?? -1n;
  }

  /**
   * Checks a response's revision against the floor its request took, and
   * records it. Throws StaleRevisionError when revision <= floor.
   */
  check(namespace: string, floor: bigint, revision: bigint, first?: bigint, last?: bigint): void {
    if (revision <= floor) {
      throw new StaleRevisionError(namespace, revision, floor, first, last);
    }
    if (revision > this.floor(namespace)) {
      this.#highest.set(namespace, revision);
    }
  }
}
