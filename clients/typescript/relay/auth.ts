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

/** Sources tracked at once: the oldest is forgotten past it. */
export const MAX_AUTH_SOURCES = 4096;

interface Source {
  failures: number;
  lockedUntil: number;
}

export class AuthGuard {
  private sources = new Map<string, Source>();
  private lastLog = -Infinity;
  private suppressed = 0;

  constructor(private limits: AuthLimits, private log: (msg: string, fields: Record<string, unknown>) => void) {}

  /** ms left of source's lockout, or 0 when it may try. */
  lockedFor(source: string): number {
    const s = this.sources.get(source);
    return s ? Math.max(0, s.lockedUntil - Date.now()) : 0;
  }

  /** A right token: the source's failures are forgotten. */
  passed(source: string): void {
    this.sources.delete(source);
  }

  /** A wrong or missing token from source: counted, logged at most once
   * per authLogIntervalMs, and past authMaxFailures the source is locked
   * out (logged each time a lockout starts). */
  failed(source: string, why: string): void {
    const now = Date.now();
    let s = this.sources.get(source);
    if (!s) {
      if (this.sources.size >= MAX_AUTH_SOURCES) this.sources.delete(this.sources.keys().next().value!);
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
