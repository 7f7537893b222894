// ClientOptions.ensureDaemon: the client starts the daemon, and starts it
// again when a reconnect finds none; clients racing to do so leave one
// daemon running. The backoff starts over once the daemon is back, and
// every re-attached stream counts in reattaches.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sessiondBinary } from "./daemon.js";
import { untilTurnCompleted } from "./helpers.js";
import { SessiondClient, daemonAnswers, stopDaemon } from "../src/index.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };

/** pids of the `sessiond serve` processes whose command line names dir. */
function daemonsIn(dir: string): number[] {
  const pids: number[] = [];
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const cmd = readFileSync(`/proc/${e}/cmdline`, "utf8").split("\0");
      const stat = readFileSync(`/proc/${e}/stat`, "utf8");
      if (cmd.includes("serve") && cmd.some((a) => a.startsWith(dir)) && !/\) Z /.test(stat)) pids.push(Number(e));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

test("ensureDaemon as a connect option: started, restarted after it died by one client of two (never two starts), the backoff reset, streams re-attached", T, async () => {
  const dir = mkdtempSync(join(tmpdir(), "sdka-"));
  const socketPath = join(dir, "run", "s.sock");
  writeFileSync(join(dir, "none.toml"), "");
  const ensure = { binary: sessiondBinary(), stateDir: join(dir, "state"), env: { ...process.env, SESSIOND_CONFIG: join(dir, "none.toml") } };
  const opts = { socketPath, ensureDaemon: ensure, reconnect: { initialDelayMs: 20, maxDelayMs: 400, healthyMs: 600_000 } };
  let a: SessiondClient | undefined;
  let b: SessiondClient | undefined;
  try {
    const startedA: unknown[] = [];
    a = await SessiondClient.connect(opts);
    b = await SessiondClient.connect(opts);
    const first = (await a.status()).pid;
    assert.equal((await b.status()).pid, first);
    assert.deepEqual(daemonsIn(dir), [first]);
    const { sessionId } = await a.create({ provider: "echo", cwd: dir });
    const sub = await a.attach(sessionId);
    a.on("daemonStarted", (e) => startedA.push(e));
    const waits: number[] = [];
    a.on("reconnecting", (e: { delayMs: number }) => waits.push(e.delayMs));
    for (let round = 1; round <= 3; round++) {
      const before: number = (await a.status()).pid;
      const back = Promise.all([a, b].map((c) => new Promise((r) => c!.once("reconnected", r))));
      process.kill(before, "SIGKILL");
      await back;
      const pa: number = (await a!.status()).pid;
      assert.notEqual(pa, before, "a new daemon");
      assert.equal((await b.status()).pid, pa, "both clients on the one daemon");
      assert.deepEqual(daemonsIn(dir), [pa], "one daemon runs, never two");
      assert.equal(sub.reattaches, round, "the stream was re-attached once per reconnect");
    }
    // Never a second daemon started: the start lock let one client start
    // it, the other waited (a start that lost the store lock says so in
    // the log).
    assert.doesNotMatch(readFileSync(join(dir, "state", "sessiond.log"), "utf8"), /store is locked by another sessiond|another sessiond is accepting/);
    // Each reconnect found no daemon at first, so each cycle began at the
    // initial delay again (it kept doubling across quick restarts).
    assert.ok(waits.length >= 3);
    for (const w of waits) assert.ok(w <= 40, `waits ${waits.join(",")}`);
    assert.equal(waits[0], 20);
    // The stream goes on across the restarts. The session was live on a
    // daemon that died: hold it again to send.
    await a.hold({ sessionId, holderId: "t" });
    const { turnId } = await a.send({ sessionId, text: "hi" });
    await untilTurnCompleted(sub, turnId);
    // The app that started it stops it (admin capability asked for).
    a.close();
    b.close();
    assert.equal(await stopDaemon({ socketPath }), true);
    assert.equal(await daemonAnswers(socketPath), false);
    assert.equal(await stopDaemon({ socketPath }), false);
  } finally {
    a?.close();
    b?.close();
    for (const pid of daemonsIn(dir)) process.kill(pid, "SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
});
