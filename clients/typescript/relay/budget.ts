/** What one phone's calls may hold on the relay while they are in flight:
 * the replies on their way from the daemon (a reply passes through the
 * relay as the bytes read, the parsed result, its JSON and its frame) and
 * the requests waiting for theirs. */

/** Bytes a reply may take on the relay while it passes: a page of events
 * or sessions (the daemon's messages are at most max_message_bytes, 1 MiB
 * by default) takes about four times its size; any other answer is small. */
export const PAGE_REPLY_BYTES = 4 << 20;
export const SMALL_REPLY_BYTES = 16 << 10;
const PAGE_METHODS = new Set(["agentSession.read", "agentSession.list"]);

/** Replies of one phone on their way at once (bytes reserved): one page,
 * or many small answers. */
export const REPLY_BUDGET = PAGE_REPLY_BYTES;

export function replyCost(method: string): number {
  return PAGE_METHODS.has(method) ? PAGE_REPLY_BYTES : SMALL_REPLY_BYTES;
}

/**
 * Admits reservations in arrival order while their sum stays within max
 * (one alone is always admitted): a call waits here, still counted in
 * flight, until the replies before it have passed. Nothing is refused, so
 * a phone's limits (maxInFlight, maxBufferedBytes) keep their meaning.
 */
export class ByteBudget {
  private used = 0;
  private waiting: Array<{ bytes: number; go: (ok: boolean) => void }> = [];
  private ended = false;

  constructor(private readonly max: number) {}

  /** Resolves true once bytes are reserved, false if the budget ended
   * (the phone went) first. */
  take(bytes: number): Promise<boolean> {
    if (this.ended) return Promise.resolve(false);
    if (this.waiting.length === 0 && this.fits(bytes)) {
      this.used += bytes;
      return Promise.resolve(true);
    }
    return new Promise((go) => this.waiting.push({ bytes, go }));
  }

  give(bytes: number): void {
    this.used -= bytes;
    while (!this.ended && this.waiting.length > 0 && this.fits(this.waiting[0]!.bytes)) {
      const w = this.waiting.shift()!;
      this.used += w.bytes;
      w.go(true);
    }
  }

  /** Every waiter resolves false; no take succeeds after. */
  end(): void {
    this.ended = true;
    for (const w of this.waiting.splice(0)) w.go(false);
  }

  get reserved(): number {
    return this.used;
  }

  private fits(bytes: number): boolean {
    return this.used === 0 || this.used + bytes <= this.max;
  }
}
