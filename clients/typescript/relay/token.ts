import { randomBytes, createHash, timingSafeEqual } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync, chmodSync, lstatSync, linkSync, unlinkSync } from "node:fs";
import { dirname } from "node:path";

/** Shortest token a token file may hold. */
export const MIN_TOKEN_LENGTH = 32;

/**
 * What makes the token file's directory unsafe: not a directory (a
 * symlink included), owned by another user, or writable by group or
 * others (whoever can write there can swap the token file). undefined when
 * it is safe or does not exist.
 */
export function tokenDirProblem(dir: string): string | undefined {
  let st;
  try {
    st = lstatSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
  const euid = typeof process.geteuid === "function" ? process.geteuid() : st.uid;
  if (!st.isDirectory()) return `is not a directory${st.isSymbolicLink() ? " (a symlink)" : ""}`;
  if (st.uid !== euid) return `is owned by uid ${st.uid}, not ${euid}`;
  if ((st.mode & 0o022) !== 0) {
    return `has mode ${(st.mode & 0o777).toString(8).padStart(4, "0")}, writable by group or others (chmod 700 it)`;
  }
  return undefined;
}

function checkDir(path: string): void {
  const dir = dirname(path);
  const problem = tokenDirProblem(dir);
  if (problem) throw new Error(`relay token directory ${dir} ${problem}; refusing the token file ${path}`);
}

/**
 * Reads the relay's bearer token from path, creating it (0600, in a 0700
 * directory) with 32 random bytes when absent. created says which. A token
 * file that is a symlink, readable or writable by group or others, or
 * holds fewer than MIN_TOKEN_LENGTH characters is refused (an error naming
 * the file and the problem), never used nor replaced; so is one whose
 * directory is not a directory, is another user's, or is writable by
 * group or others (tokenDirProblem).
 */
export function loadOrCreateToken(path: string): { token: string; created: boolean } {
  checkDir(path);
  let st;
  try {
    st = lstatSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
  if (st) {
    if (st.isSymbolicLink()) throw new Error(`relay token file ${path} is a symlink; refusing it`);
    if (!st.isFile()) throw new Error(`relay token file ${path} is not a regular file`);
    if ((st.mode & 0o077) !== 0) {
      throw new Error(`relay token file ${path} has mode ${(st.mode & 0o777).toString(8).padStart(4, "0")}, open to group or others (chmod 600 it)`);
    }
    const t = readFileSync(path, "utf8").trim();
    if (t.length < MIN_TOKEN_LENGTH) {
      throw new Error(`relay token in ${path} is ${t.length} characters, under the minimum of ${MIN_TOKEN_LENGTH} (remove the file to have one generated)`);
    }
    return { token: t, created: false };
  }
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  checkDir(path); // made by another meanwhile (mkdir -p does not say)
  // Written whole to a temp file, then linked into place: the token file
  // never exists half-written, and of racing starts one creates it and the
  // others (EEXIST) read the winner's.
  const token = randomBytes(32).toString("base64url");
  const tmp = `${path}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
  writeFileSync(tmp, token + "\n", { mode: 0o600, flag: "wx" });
  try {
    chmodSync(tmp, 0o600);
    linkSync(tmp, path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return loadOrCreateToken(path);
    throw e;
  } finally {
    unlinkSync(tmp);
  }
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
