import { randomBytes, createHash, timingSafeEqual } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync, chmodSync } from "node:fs";
import { dirname } from "node:path";

/**
 * Reads the relay's bearer token from path, creating it (0600, in a 0700
 * directory) with 32 random bytes when absent. created says which.
 */
export function loadOrCreateToken(path: string): { token: string; created: boolean } {
  try {
    const t = readFileSync(path, "utf8").trim();
    if (t.length >= 16) return { token: t, created: false };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const token = randomBytes(32).toString("base64url");
  writeFileSync(path, token + "\n", { mode: 0o600, flag: "w" });
  chmodSync(path, 0o600);
  return { token, created: true };
}

/** Compares a presented token with the expected one in constant time
 * (both hashed first, so lengths never leak either). */
export function tokenMatches(presented: string | undefined, expected: string): boolean {
  const a = createHash("sha256").update(presented ?? "").digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b) && presented !== undefined;
}

/** The token of an "Authorization: Bearer TOKEN" header. */
export function bearer(header: string | undefined): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return m?.[1];
}
