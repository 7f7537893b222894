/** The relay's bounds on one phone, and on all phones' holds together. */
export interface RelayLimits {
  /** Largest phone frame answered (default 1 MiB). A frame up to
   * FRAME_MARGIN bytes past it gets a message_too_large error and the phone
   * stays connected; a bigger one is never read: the WebSocket is closed
   * 1009 as soon as its header names the length. */
  maxMessageBytes: number;
  /** Bytes queued to a phone and not yet taken by it (ws bufferedAmount,
   * default 16 MiB): a reply or event that would pass it closes the phone
   * 1008 (logged once). Event streams and calls wait while half of it is
   * unread (relay/budget.ts: replies on their way are counted too). */
  maxBufferedBytes: number;
  /** A phone's calls being answered at once (default 64): past it a call is
   * refused -32019 limit_exceeded (data.limit "phone_calls"). */
  maxInFlight: number;
  /** Live holds one phone connection took (default 32): past it a hold is
   * refused -32019 limit_exceeded (data.limit "phone_holds"). */
  maxHoldsPerPhone: number;
  /** Live holds of all phones, on the relay's one daemon connection
   * (default 768; the daemon allows 1024 per connection): past it
   * limit_exceeded (data.limit "relay_holds"). A phone's holds count until
   * released or their ttl ends, after it disconnects too. */
  maxHolds: number;
  /** Longest ttlMs a phone may ask for (default 1 h): a longer one is
   * refused -32602 invalid_params (data.field "ttlMs"), never clamped. */
  maxHoldTtlMs: number;
  /** ttl of a phone's hold when it names none (default 120 s). */
  holdTtlMs: number;
  /** Phones connected at once (default 64; each has a daemon connection
   * of its own, and the daemon allows max_connections, 512 by default):
   * past it the WebSocket upgrade is refused 503 (logged once until the
   * count drops below it again). */
  maxPhones: number;
  /** Event streams one phone connection has attached at once (default
   * 16): past it an attach is refused -32019 limit_exceeded (data.limit
   * "phone_streams"). With maxBufferedBytes it bounds what one phone that
   * never reads costs the relay (README "The relay's limits"). */
  maxStreamsPerPhone: number;
  /** WebSocket heartbeat: a ping to every phone this often (default
   * 15 s)… */
  pingIntervalMs: number;
  /** …and a phone that has not answered a ping with a pong within this
   * (default 10 s) is dead (it left the network without a FIN): its
   * socket is terminated, which frees its slot (maxPhones), its streams and
   * its daemon connection; logged once per phone ("phone closed: no
   * pong"). */
  pingTimeoutMs: number;
}

export const DEFAULT_LIMITS: RelayLimits = {
  maxMessageBytes: 1 << 20,
  maxBufferedBytes: 16 << 20,
  maxInFlight: 64,
  maxHoldsPerPhone: 32,
  maxHolds: 768,
  maxHoldTtlMs: 3_600_000,
  holdTtlMs: 120_000,
  maxPhones: 64,
  maxStreamsPerPhone: 16,
  pingIntervalMs: 15_000,
  pingTimeoutMs: 10_000,
};

/** Slack past maxMessageBytes that is still read and answered with an
 * error (instead of closing the phone). */
export const FRAME_MARGIN = 64 << 10;

export function resolveLimits(o: Partial<RelayLimits>): RelayLimits {
  const l: RelayLimits = { ...DEFAULT_LIMITS };
  for (const k of Object.keys(DEFAULT_LIMITS) as Array<keyof RelayLimits>) {
    const v = o[k];
    if (v === undefined) continue;
    if (!Number.isSafeInteger(v) || v < 1) throw new Error(`relay: ${k} must be a positive integer, got ${String(v).slice(0, 32)}`);
    l[k] = v;
  }
  if (l.holdTtlMs > l.maxHoldTtlMs) throw new Error(`relay: holdTtlMs ${l.holdTtlMs} is over maxHoldTtlMs ${l.maxHoldTtlMs}`);
  if (l.maxHolds > 1024) throw new Error(`relay: maxHolds ${l.maxHolds} is over the daemon's 1024 holds per connection`);
  return l;
}

/** A call the relay refuses itself: a JSON-RPC error with data.reason. */
export class RelayError extends Error {
  constructor(readonly code: number, message: string, readonly data: Record<string, unknown>) {
    super(message);
  }
}

interface Entry {
  /** The phone identity that took the hold (see Phone.identity). */
  phone: string;
  expires: number;
  /** holdTokens the relay gave out for it: one of them lets another
   * identity take the hold over. */
  tokens: Set<string>;
}

/**
 * Who took which hold: every phone's holds share the relay's daemon
 * connection, so one phone must not take them all. A hold counts against
 * the phone that took it last until it is released or its ttl ends.
 */
export class HoldLedger {
  private entries = new Map<string, Entry>();

  constructor(private limits: RelayLimits) {}

  /** Reserves key for phone until expires, or throws a RelayError naming
   * the limit, or the conflict when another phone holds key and holdToken
   * is none the relay gave out for it; undo() gives the reservation back
   * (the hold failed), given(token) records the token the hold returned. */
  take(phone: string, key: string, expires: number, holdToken?: unknown): { undo(): void; given(token: string): void } {
    const now = Date.now();
    for (const [k, e] of this.entries) if (e.expires <= now) this.entries.delete(k);
    const prev = this.entries.get(key);
    if (prev && prev.phone !== phone && !(typeof holdToken === "string" && prev.tokens.has(holdToken))) {
      const [sessionId, holderId] = key.split("\u0000");
      throw new RelayError(-32040, `holder ${JSON.stringify(String(holderId).slice(0, 64))} of session ${String(sessionId).slice(0, 128)} is held by another phone; take it over with its holdToken, or use a holderId of your own`,
        { reason: "holder_conflict", sessionId: String(sessionId).slice(0, 128), holderId: String(holderId).slice(0, 64) });
    }
    if (prev?.phone !== phone) {
      let mine = 0;
      for (const e of this.entries.values()) if (e.phone === phone) mine++;
      if (mine >= this.limits.maxHoldsPerPhone) {
        throw new RelayError(-32019, `this phone holds ${mine} sessions, the relay's limit per phone (maxHoldsPerPhone ${this.limits.maxHoldsPerPhone})`,
          { reason: "limit_exceeded", limit: "phone_holds", max: this.limits.maxHoldsPerPhone });
      }
      if (!prev && this.entries.size >= this.limits.maxHolds) {
        throw new RelayError(-32019, `the relay's phones hold ${this.entries.size} sessions, its limit (maxHolds ${this.limits.maxHolds})`,
          { reason: "limit_exceeded", limit: "relay_holds", max: this.limits.maxHolds });
      }
    }
    const entry: Entry = { phone, expires, tokens: new Set(prev?.tokens) };
    this.entries.set(key, entry);
    return {
      given: (token) => void entry.tokens.add(token),
      undo: () => {
        if (this.entries.get(key) !== entry) return;
        if (prev && prev.expires > Date.now()) this.entries.set(key, prev);
        else this.entries.delete(key);
      },
    };
  }

  /** The hold ended (released). */
  drop(key: string): void {
    this.entries.delete(key);
  }

  get size(): number {
    return this.entries.size;
  }
}
