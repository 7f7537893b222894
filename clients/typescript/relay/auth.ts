/** Failed bearer-token checks: logged (rate-limited, with what was
 * suppressed) and limited per source address, so a token cannot be tried
 * quickly. */

export interface AuthLimits {
  /** Failed tokens one source address may present before it is locked
   * out (default 10). */
  authMaxFailures: number;
  /** The first lockout (default 1 s); every failure past authMaxFailures
   * doubles the next, up to authMaxLockoutMs (default 5 min). While locked
   * out every upgrade from that source is refused 429 without looking at
   * its token (a right one too), with Retry-After. */
  authLockoutMs: number;
  authMaxLockoutMs: number;
  /** At most one "phone refused: bad token" line per this (default 10 s);
   * the next one carries how many were suppressed. */
  authLogIntervalMs: number;
}

export const DEFAULT_AUTH_LIMITS: AuthLimits = {
  authMaxFailures: 10,
  authLockoutMs: 1000,
  authMaxLockoutMs: 300_000,
  authLogIntervalMs: 10_000,
};

/** Sources tracked at once. Past it the oldest source that is not locked
 * out is forgotten (a locked-out one is kept, so many other sources
 * cannot free it), or, when every one is, the one whose lockout ends
 * first. */
export const MAX_AUTH_SOURCES = 4096;

/** What a failure counts against: an IPv4 address (an IPv4-mapped IPv6
 * one is the IPv4 address), or the /64 of an IPv6 address (one host
 * commonly has a whole /64). */
export function sourceKey(addr: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(addr);
  if (mapped) return mapped[1]!;
  if (!addr.includes(":")) return addr;
  const bare = addr.split("%")[0]!; // a zone (fe80::1%eth0)
  const [head, tail] = bare.includes("::") ? bare.split("::") as [string, string] : [bare, undefined];
  const h = head === "" ? [] : head.split(":");
  const t = tail === undefined || tail === "" ? [] : tail.split(":");
  const groups = tail === undefined ? h : [...h, ...Array<string>(Math.max(0, 8 - h.length - t.length)).fill("0"), ...t];
  if (groups.length < 4) return addr;
  return groups.slice(0, 4).map((g) => (parseInt(g, 16) || 0).toString(16)).join(":") + "::/64";
}

interface Source {
  failures: number;
  lockedUntil: number;
}

export class AuthGuard {
  /** By sourceKey, in use order (the oldest first). */
  private sources = new Map<string, Source>();
  private lastLog = -Infinity;
  private suppressed = 0;

  constructor(private limits: AuthLimits, private log: (msg: string, fields: Record<string, unknown>) => void) {}

  /** ms left of source's lockout, or 0 when it may try. */
  lockedFor(addr: string): number {
    const s = this.sources.get(sourceKey(addr));
    return s ? Math.max(0, s.lockedUntil - Date.now()) : 0;
  }

  /** A right token: the source's failures are forgotten. */
  passed(addr: string): void {
    this.sources.delete(sourceKey(addr));
  }

  /** A wrong or missing token from source: counted, logged at most once
   * per authLogIntervalMs, and past authMaxFailures the source is locked
   * out (logged each time a lockout starts). */
  failed(addr: string, why: string): void {
    const now = Date.now();
    const source = sourceKey(addr);
    let s = this.sources.get(source);
    if (!s) {
      if (this.sources.size >= MAX_AUTH_SOURCES) this.forgetOne(now);
      s = { failures: 0, lockedUntil: 0 };
    }
    this.sources.delete(source); // re-inserted: the map stays in use order
    this.sources.set(source, s);
    s.failures++;
    if (now - this.lastLog >= this.limits.authLogIntervalMs) {
      this.lastLog = now;
      this.log("phone refused: bad token", { source, reason: why, failures: s.failures, suppressed: this.suppressed });
      this.suppressed = 0;
    } else {
      this.suppressed++;
    }
    const { authMaxFailures, authLockoutMs, authMaxLockoutMs } = this.limits;
    if (s.failures >= authMaxFailures) {
      const ms = Math.min(authMaxLockoutMs, authLockoutMs * 2 ** Math.min(30, s.failures - authMaxFailures));
      s.lockedUntil = now + ms;
      this.log("phone source locked out", { source, failures: s.failures, lockout_ms: ms, suppressed: this.suppressed });
    }
  }

  /** Forgets the oldest source not locked out, else the one whose
   * lockout ends first. */
  private forgetOne(now: number): void {
    let soonest: [string, number] | undefined;
    for (const [k, v] of this.sources) {
      if (v.lockedUntil <= now) {
        this.sources.delete(k);
        return;
      }
      if (!soonest || v.lockedUntil < soonest[1]) soonest = [k, v.lockedUntil];
    }
    if (soonest) this.sources.delete(soonest[0]);
  }
}

export function resolveAuthLimits(o: Partial<AuthLimits>): AuthLimits {
  const l: AuthLimits = { ...DEFAULT_AUTH_LIMITS };
  for (const k of Object.keys(DEFAULT_AUTH_LIMITS) as Array<keyof AuthLimits>) {
    const v = o[k];
    if (v === undefined) continue;
    if (!Number.isSafeInteger(v) || v < 0 || (k === "authMaxFailures" && v < 1)) {
      throw new Error(`relay: ${k} must be a ${k === "authMaxFailures" ? "positive" : "non-negative"} integer, got ${String(v).slice(0, 32)}`);
    }
    l[k] = v;
  }
  if (l.authLockoutMs > l.authMaxLockoutMs) throw new Error(`relay: authLockoutMs ${l.authLockoutMs} is over authMaxLockoutMs ${l.authMaxLockoutMs}`);
  return l;
}
