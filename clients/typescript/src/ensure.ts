import { spawn } from "node:child_process";
import { mkdirSync, openSync, closeSync, readFileSync, readSync, fstatSync, writeSync, unlinkSync, constants as fsc } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { createRequire } from "node:module";
import { createConnection } from "node:net";
import { resolveSocketPath, resolveStateDir, socketDirProblem } from "./socket.js";
import { UnsafeSocketError } from "./errors.js";
import { here } from "./here.cjs";

export interface EnsureDaemonOptions {
  /** The sessiond binary; default the one @sessiond/daemon ships for this
   * platform, else `sessiond` on PATH. */
  binary?: string;
  socketPath?: string;
  stateDir?: string;
  /** How long to wait for the daemon to accept (default 15 s). */
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
}

export interface EnsureDaemonResult {
  socketPath: string;
  /** True when this call started the daemon that now answers. */
  started: boolean;
  /** The started daemon's log (stdout and stderr), under the state dir. */
  logFile?: string;
}

/** Whether something accepts connections on path. */
export function daemonAnswers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection(path);
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

/** The binary @sessiond/daemon ships for this platform, if installed. */
export function packagedBinary(): string | undefined {
  try {
    const req = createRequire(here);
    const mod = req("@sessiond/daemon") as { binaryPath(): string };
    return mod.binaryPath();
  } catch {
    return undefined;
  }
}

/**
 * Makes sure a daemon answers on the socket: when none does, starts
 * `sessiond serve` detached (its own session, output to
 * <state-dir>/sessiond.log) and waits until it accepts. Two callers racing
 * never start two daemons: the daemon's flock decides, and the loser's exit
 * is expected, not an error, as long as the winner answers.
 */
export async function ensureDaemon(opts: EnsureDaemonOptions = {}): Promise<EnsureDaemonResult> {
  const env = opts.env ?? process.env;
  const socketPath = resolveSocketPath(opts.socketPath, env);
  const problem = socketDirProblem(socketPath);
  if (problem) throw new UnsafeSocketError(socketPath, problem);
  if (await daemonAnswers(socketPath)) return { socketPath, started: false };
  const stateDir = resolveStateDir(opts.stateDir, env);
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const deadline = Date.now() + (opts.timeoutMs ?? 15_000);
  // One starter at a time across processes: whoever holds the start lock
  // spawns, the others wait for its daemon to answer (and start one
  // themselves only if that starter died or gave up).
  for (let delay = 20; ; delay = Math.min(delay * 2, 250)) {
    const unlock = takeStartLock(join(stateDir, "start.lock"), Math.max(opts.timeoutMs ?? 15_000, START_LOCK_MAX_AGE_MS));
    if (unlock) {
      try {
        if (await daemonAnswers(socketPath)) return { socketPath, started: false };
        return await spawnDaemon(opts, env, socketPath, stateDir, deadline);
      } finally {
        unlock();
      }
    }
    if (await daemonAnswers(socketPath)) return { socketPath, started: false };
    if (Date.now() > deadline) {
      throw new Error(`ensureDaemon: no daemon answers on ${socketPath} after ${opts.timeoutMs ?? 15_000} ms, and another process (${join(stateDir, "start.lock")}) is starting one`);
    }
    await new Promise((r) => setTimeout(r, delay));
  }
}

/** A start lock older than this (or than the caller's start timeout, if
 * longer) is stale: its starter hung or died without a trace. */
const START_LOCK_MAX_AGE_MS = 60_000;

/** What start.lock holds: the starter's pid, its process start time
 * (Linux: /proc/PID/stat field 22, else null), when it took the lock, and
 * a nonce of that take. */
interface LockRecord { pid: number; start: string | null; at: number; nonce: string }

/** Nonces of the start locks this process holds now (two ensureDaemon
 * calls of one process wait on each other like two processes). */
const ownLocks = new Set<string>();

/** Takes path (O_EXCL, holding a LockRecord): the unlock function, or
 * undefined while another start holds it. A lock is stale and taken over
 * when its process is gone, when the pid now runs another process (its
 * start time differs from the one recorded), when it is older than the
 * start timeout (maxAgeMs), or when it is this process's pid but no take
 * of this process (a pid reused after a reboot, say). */
function takeStartLock(path: string, maxAgeMs: number): (() => void) | undefined {
  for (let i = 0; i < 2; i++) {
    const rec: LockRecord = { pid: process.pid, start: procStart(process.pid), at: Date.now(), nonce: randomBytes(8).toString("hex") };
    const text = JSON.stringify(rec);
    try {
      const fd = openSync(path, "wx", 0o600);
      writeSync(fd, text);
      closeSync(fd);
      ownLocks.add(rec.nonce);
      return () => {
        ownLocks.delete(rec.nonce);
        try {
          if (readLock(path)?.text === text) unlinkSync(path);
        } catch {
          // gone already
        }
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    const held = readLock(path);
    if (held === undefined) continue; // released meanwhile: try again
    if (!lockStale(held.text, held.mtime, maxAgeMs)) return undefined;
    try {
      if (readLock(path)?.text === held.text) unlinkSync(path); // its starter is gone
    } catch {
      // another took it over first
    }
  }
  return undefined;
}

/** Longest start.lock read: a LockRecord is under 200 bytes. */
const MAX_LOCK_BYTES = 4096;

/** The start.lock at path, never following a symlink and never blocking:
 * its text and mtime, undefined when there is none. Anything but a
 * regular file (a symlink, a FIFO, a device) or one over MAX_LOCK_BYTES
 * reads as "" (no lock a start wrote: stale). */
function readLock(path: string): { text: string; mtime: number } | undefined {
  let fd: number;
  try {
    fd = openSync(path, fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    if (code === "ELOOP") return { text: "", mtime: 0 }; // a symlink
    throw e;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > MAX_LOCK_BYTES) return { text: "", mtime: st.mtimeMs };
    const buf = Buffer.alloc(MAX_LOCK_BYTES + 1);
    const n = readSync(fd, buf, 0, buf.length, 0);
    return { text: n > MAX_LOCK_BYTES ? "" : buf.subarray(0, n).toString("utf8"), mtime: st.mtimeMs };
  } finally {
    closeSync(fd);
  }
}

function lockStale(held: string, mtime: number, maxAgeMs: number): boolean {
  let rec: Partial<LockRecord> = {};
  try {
    const v = JSON.parse(held) as unknown;
    if (typeof v === "number") rec = { pid: v }; // an older client's: the pid alone
    else if (v && typeof v === "object") rec = v as Partial<LockRecord>;
  } catch {
    return true; // not a lock any start wrote whole
  }
  const at = typeof rec.at === "number" ? rec.at : mtime;
  if (Date.now() - at > maxAgeMs) return true;
  const pid = Number(rec.pid);
  if (pid === process.pid) return !(typeof rec.nonce === "string" && ownLocks.has(rec.nonce));
  if (!alive(pid)) return true;
  if (rec.start === undefined) {
    // An older client's lock, the pid alone: a pid that lives but whose
    // process started after the lock was written is another process now.
    const started = procStartMs(pid);
    return started !== null && started > mtime + 1000;
  }
  const now = procStart(pid);
  return now !== null && rec.start !== null && now !== rec.start;
}

/** When a process started (ms since the epoch): boot time (/proc/stat
 * btime) plus its start time in clock ticks (100 a second on Linux), or
 * null where there is no /proc. */
function procStartMs(pid: number): number | null {
  const ticks = procStart(pid);
  if (ticks === null) return null;
  try {
    const m = /^btime (\d+)$/m.exec(readFileSync("/proc/stat", "utf8"));
    return m ? Number(m[1]) * 1000 + Number(ticks) * 10 : null;
  } catch {
    return null;
  }
}

/** A process's start time (Linux /proc/PID/stat field 22, in clock ticks
 * since boot), or null where there is no /proc. */
function procStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // comm (field 2) may hold spaces and parentheses: count from the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields[19] ?? null; // fields[0] is field 3 (state): field 22 is fields[19]
  } catch {
    return null;
  }
}

function alive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

async function spawnDaemon(opts: EnsureDaemonOptions, env: NodeJS.ProcessEnv, socketPath: string, stateDir: string, deadline: number): Promise<EnsureDaemonResult> {
  const logFile = join(stateDir, "sessiond.log");
  const fd = openSync(logFile, "a", 0o600);
  const logFrom = fstatSync(fd).size; // this start's output begins here
  const binary = opts.binary ?? packagedBinary() ?? "sessiond";
  const args = ["serve", "--socket", socketPath, "--state-dir", stateDir];
  let exit: { code: number | null; signal?: string | null; err?: Error } | undefined;
  const child = spawn(binary, args, { detached: true, stdio: ["ignore", fd, fd], env });
  closeSync(fd);
  child.once("exit", (code, signal) => (exit = { code, signal }));
  child.once("error", (err) => (exit = { code: null, err }));
  child.unref();
  for (let delay = 20; ; delay = Math.min(delay * 2, 250)) {
    if (await daemonAnswers(socketPath)) {
      // Whoever answers won the store's flock; a child of ours that lost
      // exits on its own (non-zero, naming the other), which is no error.
      return { socketPath, started: (await answeringPid(socketPath)) === child.pid, logFile };
    }
    if (exit?.err) throw new Error(`ensureDaemon: cannot start ${binary}: ${exit.err.message}`);
    if (exit) {
      // Ours exited: losing the race to another daemon is no error (that
      // one answers shortly); anything else is, at once.
      const out = readTail(logFile, logFrom);
      if (!LOST_RACE.test(out)) {
        throw new Error(`ensureDaemon: ${binary} exited ${exit.code ?? exit.signal} before accepting on ${socketPath}; log ${logFile}:\n${out.slice(-2000)}`);
      }
    }
    if (Date.now() > deadline) {
      const tail = readTail(logFile);
      throw new Error(`ensureDaemon: no daemon answers on ${socketPath} after ${opts.timeoutMs ?? 15_000} ms` +
        (exit ? ` (sessiond exited ${exit.code})` : "") + `; log ${logFile}:\n${tail}`);
    }
    await new Promise((r) => setTimeout(r, delay));
  }
}

async function answeringPid(socketPath: string): Promise<number | undefined> {
  const { SessiondClient } = await import("./client.js");
  const c = await SessiondClient.connect({ socketPath, reconnect: false, capabilities: [] });
  try {
    return (await c.status()).pid;
  } finally {
    c.close();
  }
}

/** What a daemon that lost the start race to another one says. */
const LOST_RACE = /store is locked by another sessiond|another sessiond is accepting on this socket/;

function readTail(path: string, from = 0): string {
  try {
    return readFileSync(path).subarray(from).toString("utf8").slice(-4000);
  } catch {
    return "";
  }
}

/**
 * Stops the daemon on the socket (daemon.shutdown, asking for the
 * daemon.admin.v1 capability that call needs; the client's default
 * capabilities leave it out), then waits until its socket no longer
 * accepts (at most timeoutMs, default 60 s). Resolves false when no
 * daemon answered.
 * For an app that started the daemon with ensureDaemon and owns it.
 */
export async function stopDaemon(opts: { socketPath?: string; timeoutMs?: number } = {}): Promise<boolean> {
  const { SessiondClient } = await import("./client.js");
  const { DEFAULT_CAPABILITIES } = await import("./options.js");
  const socketPath = resolveSocketPath(opts.socketPath);
  if (!(await daemonAnswers(socketPath))) return false;
  const c = await SessiondClient.connect({ socketPath, reconnect: false, timeoutMs: opts.timeoutMs,
    capabilities: [...DEFAULT_CAPABILITIES, "daemon.admin.v1"] });
  try {
    await c.shutdown();
  } finally {
    c.close();
  }
  // The daemon answers daemon.shutdown before it has stopped: resolve
  // once its socket no longer accepts (bounded), so a caller can start
  // another at once.
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  while (await daemonAnswers(socketPath)) {
    if (Date.now() > deadline) throw new Error(`sessiond on ${socketPath} still accepts connections after daemon.shutdown`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}
