import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, symlinkSync, readlinkSync, rmSync, existsSync, readdirSync, readFileSync, mkdirSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sessiondBinary } from "./daemon.js";
import { ensureDaemon, daemonAnswers, SessiondClient } from "../src/index.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 120_000) };

/** Shuts the daemon on socketPath down; SIGKILLs it if that fails, so a
 * failed test leaves nothing running. */
async function shutdown(socketPath: string): Promise<void> {
  const c = await SessiondClient.connect({ socketPath, reconnect: false, capabilities: ["daemon.admin.v1"] });
  const { pid } = await c.status();
  try {
    await c.shutdown();
  } catch (e) {
    process.kill(pid, "SIGKILL");
    throw e;
  } finally {
    c.close();
  }
}

/** pids of the `sessiond serve` processes whose command line names dir
 * (a temp dir of this test's own: only daemons it started). */
function daemonsIn(dir: string): number[] {
  const pids: number[] = [];
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${e}/cmdline`, "utf8").split("\0");
    } catch {
      continue; // gone meanwhile
    }
    if (argv.includes("serve") && argv.some((a) => a.startsWith(dir + "/"))) pids.push(Number(e));
  }
  return pids;
}

/** Registers the last word of a test that starts daemons under dir: every
 * one still running is SIGKILLed (an assertion failed, the test timed
 * out …) and waited for, then dir is removed. */
function cleanup(t: { after(fn: () => Promise<void>): void }, dir: string): void {
  t.after(async () => {
    for (const pid of daemonsIn(dir)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        continue;
      }
      // Reaped by init (detached): gone from /proc once it has exited.
      while (existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(safeRead(`/proc/${pid}/status`))) {
        await new Promise((r) => setTimeout(r, 10));
      }
    }
    rmSync(dir, { recursive: true, force: true });
  });
}

function safeRead(f: string): string {
  try {
    return readFileSync(f, "utf8");
  } catch {
    return "";
  }
}

test("ensureDaemon starts one daemon for two racing callers, and none when one answers", T, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "sden-"));
  cleanup(t, dir);
  const socketPath = join(dir, "run", "s.sock");
  const stateDir = join(dir, "state");
  const opts = { binary: sessiondBinary(), socketPath, stateDir, env: { ...process.env, SESSIOND_CONFIG: join(dir, "none.toml") } };
  writeFileSync(join(dir, "none.toml"), "");
  try {
    const [a, b] = await Promise.all([ensureDaemon(opts), ensureDaemon(opts)]);
    assert.equal([a, b].filter((r) => r.started).length, 1, "exactly one caller started the daemon");
    const again = await ensureDaemon(opts);
    assert.equal(again.started, false);
    assert.ok(existsSync(join(stateDir, "sessiond.log")));
  } finally {
    if (await daemonAnswers(socketPath)) await shutdown(socketPath);
  }
});

// make npm-pack's tarballs, installed into a fresh project: ensureDaemon()
// there starts the binary of the platform package npm installed.
const packDir = process.env.SESSIOND_NPM_PACK_DIR;
test("the packed tarballs install, and ensureDaemon() starts the installed binary", T, async (t) => {
  assert.ok(packDir, "SESSIOND_NPM_PACK_DIR is not set: run `make test-ts` (it packs the tarballs with `make npm-pack` and sets it)");
  const proj = mkdtempSync(join(tmpdir(), "sdin-"));
  cleanup(t, proj);
  try {
    writeFileSync(join(proj, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    const cpu = process.arch === "arm64" ? "arm64" : "x64";
    const tgz = [`sessiond-daemon-linux-${cpu}-0.1.0.tgz`, "sessiond-daemon-0.1.0.tgz", "sessiond-client-0.1.0.tgz"]
      .map((f) => join(packDir!, f));
    execFileSync("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", ...tgz], { cwd: proj, stdio: "inherit" });
    writeFileSync(join(proj, "app.mjs"), `
import { ensureDaemon, packagedBinary, SessiondClient } from "@sessiond/client";
const r = await ensureDaemon();
const c = await SessiondClient.connect({ reconnect: false });
const st = await c.status();
c.close();
console.log(JSON.stringify({ ...r, binary: packagedBinary(), pid: st.pid }));
`);
    const env = { ...process.env, SESSIOND_SOCKET: join(proj, "run", "s.sock"), SESSIOND_STATE_DIR: join(proj, "state"),
      SESSIOND_CONFIG: join(proj, "none.toml") };
    writeFileSync(join(proj, "none.toml"), "");
    const out = JSON.parse(execFileSync(process.execPath, ["app.mjs"], { cwd: proj, env, encoding: "utf8" })) as
      { started: boolean; binary: string; pid: number; socketPath: string };
    try {
      assert.equal(out.started, true);
      assert.equal(out.binary, join(proj, "node_modules", "@sessiond", `daemon-linux-${cpu}`, "bin", "sessiond"));
      assert.equal(readlinkSync(`/proc/${out.pid}/exe`), out.binary, "the running daemon is the installed binary");
    } finally {
      await shutdown(out.socketPath);
    }
  } finally {
    const sock = join(proj, "run", "s.sock");
    if (await daemonAnswers(sock)) await shutdown(sock);
  }
});

test("ensureDaemon fails at once, with the exit code and the log, when the daemon it started exits", T, async () => {
  const dir = mkdtempSync(join(tmpdir(), "sdex-"));
  try {
    const script = join(dir, "sessiond");
    writeFileSync(script, "#!/bin/sh\necho 'sessiond: cannot open the store: boom' >&2\nexit 3\n", { mode: 0o700 });
    // A timeout the test would never outlive: the answer comes from the exit.
    await assert.rejects(ensureDaemon({ binary: script, socketPath: join(dir, "run", "s.sock"), stateDir: join(dir, "state"), timeoutMs: 3_600_000 }),
      (e: unknown) => e instanceof Error && /exited 3 before accepting/.test(e.message) && /cannot open the store: boom/.test(e.message));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a stale start.lock naming a live unrelated pid is taken over, the daemon starts; a live starter's lock is waited for", T, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "sdlk-"));
  cleanup(t, dir);
  writeFileSync(join(dir, "none.toml"), "");
  const env = { ...process.env, SESSIOND_CONFIG: join(dir, "none.toml") };
  const startOf = (pid: number) => { const st = readFileSync(`/proc/${pid}/stat`, "utf8"); return st.slice(st.lastIndexOf(")") + 2).split(" ")[19]!; };
  const start1 = startOf(1);
  // A live process that is no starter: it waits on its stdin; spawned
  // after the lock naming it was written (its pid is a reused one).
  const hourAgo = new Date(Date.now() - 3_600_000);
  const bystander = () => {
    const p = spawn(process.execPath, ["-e", "process.stdin.resume()"], { stdio: ["pipe", "ignore", "ignore"] });
    t.after(() => p.kill("SIGKILL"));
    return new Promise<number>((res) => p.once("spawn", () => res(p.pid!)));
  };
  const cases: Array<{ name: string; lock: () => Promise<string>; mtime?: Date }> = [
    { name: "an older client's lock naming init, left an hour ago", lock: async () => "1", mtime: hourAgo },
    { name: "an older client's lock whose pid now runs a process started after it", lock: async () => String(await bystander()), mtime: new Date(Date.now() - 5000) },
    { name: "our own pid, no take of ours", lock: async () => String(process.pid) },
    { name: "pid 1 with another start time (reused)", lock: async () => JSON.stringify({ pid: 1, start: String(Number(start1) + 1), at: Date.now(), nonce: "x" }) },
    { name: "older than the start timeout", lock: async () => JSON.stringify({ pid: 1, start: start1, at: Date.now() - 3_600_000, nonce: "y" }) },
  ];
  for (const [i, c] of cases.entries()) {
    const stateDir = join(dir, `state${i}`);
    const socketPath = join(dir, `run${i}`, "s.sock");
    mkdirSync(stateDir, { recursive: true });
    const lockFile = join(stateDir, "start.lock");
    // The lock's mtime is set before a bystander it names is spawned.
    writeFileSync(lockFile, "");
    if (c.mtime) utimesSync(lockFile, c.mtime, c.mtime);
    const text = await c.lock();
    writeFileSync(lockFile, text);
    if (c.mtime) utimesSync(lockFile, c.mtime, c.mtime);
    const r = await ensureDaemon({ binary: sessiondBinary(), socketPath, stateDir, env, timeoutMs: 20_000 });
    assert.equal(r.started, true, c.name);
    assert.equal(existsSync(lockFile), false, `released after the start: ${c.name}`);
    await shutdown(socketPath);
  }
  // A live starter's lock (its pid, its start time, just now) is not
  // taken over: the wait ends at the timeout naming the lock.
  const pid = await bystander();
  const stateDir = join(dir, "live");
  mkdirSync(stateDir, { recursive: true });
  writeFileSync(join(stateDir, "start.lock"), JSON.stringify({ pid, start: startOf(pid), at: Date.now(), nonce: "z" }));
  await assert.rejects(ensureDaemon({ binary: sessiondBinary(), socketPath: join(dir, "runlive", "s.sock"), stateDir, env, timeoutMs: 300 }),
    /another process \(.*start\.lock\) is starting one/);
});

test("a start.lock that is a symlink (to a FIFO, to /dev/zero, to a file elsewhere) or huge garbage is stale, never read whole, never blocks; the link's target is left alone", T, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "sdlf-"));
  cleanup(t, dir);
  writeFileSync(join(dir, "none.toml"), "");
  const env = { ...process.env, SESSIOND_CONFIG: join(dir, "none.toml") };
  const fifo = join(dir, "fifo");
  execFileSync("mkfifo", [fifo]);
  const elsewhere = join(dir, "elsewhere");
  writeFileSync(elsewhere, JSON.stringify({ pid: process.pid, start: null, at: Date.now(), nonce: "n" }));
  const cases: Array<{ name: string; make: (lock: string) => void }> = [
    { name: "a symlink to a FIFO", make: (l) => symlinkSync(fifo, l) },
    { name: "a symlink to /dev/zero", make: (l) => symlinkSync("/dev/zero", l) },
    { name: "a symlink to a file elsewhere", make: (l) => symlinkSync(elsewhere, l) },
    { name: "8 MiB of garbage", make: (l) => writeFileSync(l, Buffer.alloc(8 << 20, 0x7b)) },
  ];
  for (const [i, c] of cases.entries()) {
    const stateDir = join(dir, `state${i}`);
    const socketPath = join(dir, `run${i}`, "s.sock");
    mkdirSync(stateDir, { recursive: true });
    c.make(join(stateDir, "start.lock"));
    const r = await ensureDaemon({ binary: sessiondBinary(), socketPath, stateDir, env, timeoutMs: 20_000 });
    assert.equal(r.started, true, c.name);
    assert.equal(existsSync(join(stateDir, "start.lock")), false, `released after the start: ${c.name}`);
    await shutdown(socketPath);
  }
  assert.ok(existsSync(fifo) && existsSync(elsewhere), "the links' targets are not removed");
});
