import type { Link } from "./link.js";
import { SessiondError } from "./errors.js";
import type { HoldParams, HoldResult } from "./generated/types.js";

/** A hold this client took. token: the current holdToken; given: the one
 * hold() returned (a reconnect re-holds with a new token the caller never
 * saw). */
interface Held {
  params: HoldParams;
  token: string;
  given: string;
  expires: number;
}

/** The holds a client keeps and re-takes after every reconnect. */
export class Holds {
  private map = new Map<string, Held>();
  private pruned = 0; // size of the map after the last prune

  /** Records a hold the daemon granted; sent is when the call was made
   * (the ttl runs from before the call: this client never counts a hold
   * as alive after the daemon dropped it). */
  record(p: HoldParams, r: HoldResult, sent: number): void {
    const expires = p.ttlMs ? sent + p.ttlMs : Infinity;
    this.map.set(holdKey(p.sessionId, p.holderId), { params: { ...p }, token: r.holdToken, given: r.holdToken, expires });
    if (this.map.size > 2 * this.pruned + 64) this.prune();
  }

  /** Forgets holds whose ttl ran out (the daemon dropped them). */
  prune(): void {
    const now = Date.now();
    for (const [k, h] of this.map) if (h.expires <= now) this.map.delete(k);
    this.pruned = this.map.size;
  }

  /** The token to release with: the current one when holdToken is ours
   * (the one hold() returned, the current one, or none), which forgets the
   * hold; otherwise holdToken itself. */
  releaseToken(sessionId: string, holderId: string, holdToken: string | undefined): string | undefined {
    const key = holdKey(sessionId, holderId);
    const h = this.map.get(key);
    const ours = h && (holdToken === undefined || holdToken === h.given || holdToken === h.token);
    if (!ours) return holdToken;
    this.map.delete(key);
    return h.token;
  }

  get count(): number {
    this.prune();
    return this.map.size;
  }

  token(sessionId: string, holderId: string): string | undefined {
    const h = this.map.get(holdKey(sessionId, holderId));
    return h && h.expires > Date.now() ? h.token : undefined;
  }

  /** Re-holds every live hold on link (a new holdToken each); a hold the
   * daemon refuses is forgotten and reported to lost. Other errors (the
   * connection) are thrown. */
  async restore(link: Link, deadline: number, lost: (params: HoldParams, error: SessiondError) => void): Promise<void> {
    for (const [key, h] of [...this.map]) {
      if (h.expires <= Date.now()) {
        this.map.delete(key); // its ttl ran out: the daemon dropped it
        continue;
      }
      try {
        // A ttl hold keeps what is left of its ttl, not a fresh one.
        const params = h.params.ttlMs ? { ...h.params, ttlMs: Math.max(1, Math.round(h.expires - Date.now())) } : h.params;
        const r = await link.call<HoldResult>("agentSession.hold", params, deadline);
        h.token = r.holdToken;
      } catch (e) {
        if (e instanceof SessiondError) {
          this.map.delete(key);
          lost(h.params, e);
        } else throw e;
      }
    }
  }
}

function holdKey(sessionId: string, holderId: string): string {
  return `${sessionId}\u0000${holderId}`;
}
