import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import type { Socket } from "node:net";
import { mkdtempSync, rmSync, mkdirSync, symlinkSync, chmodSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Daemon } from "./daemon.js";
import { INIT, fakePeer, frame } from "./fake.js";
import { deltaText, gapless, untilTurnCompleted } from "./helpers.js";
import { SessiondClient, StreamLostError, ConnectionClosedError, DaemonUnavailableError, UnsafeSocketError, ensureDaemon, type Subscription } from "../src/index.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };
let d: Daemon;

before(async () => {
  d = await Daemon.start();
});
after(async () => {
  await d?.stop();
});

/** Reads sub until it rejects; returns the error (a stream that ends
 * cleanly instead is a failure). */
async function errorOf(sub: Subscription): Promise<unknown> {
  for (;;) {
    let r;
    try {
      r = await sub.next();
    } catch (e) {
      return e;
    }
    if (r.done) throw new Error("stream ended without an error");
  }
}

test("a stream whose session was deleted while the daemon was down ends with StreamLostError; the rest of the client carries on", T, async () => {
  const c = await SessiondClient.connect({ socketPath: d.socket, reconnect: { initialDelayMs: 20, maxDelayMs: 200 } });
  try {
    const gone = (await c.create({ provider: "echo", cwd: d.dir })).sessionId;
    const kept = (await c.create({ provider: "echo", cwd: d.dir })).sessionId;
    await c.hold({ sessionId: kept, holderId: "desk:k" });
    const subGone = await c.attach(gone);
    const subKept = await c.attach(kept);
    let reconnects = 0;
    c.on("reconnected", () => reconnects++);
    const disconnected = new Promise((res) => c.once("disconnected", res));
    await d.kill("SIGKILL");
    await disconnected;
    // The daemon comes back where the client does not look, the session is
    // deleted there, and then it returns to the client's socket.
    const side = join(d.dir, "side.sock");
    await d.start(side);
    const other = await SessiondClient.connect({ socketPath: side, reconnect: false });
    await other.delete(gone);
    other.close();
    await d.kill("SIGTERM");
    const reconnected = new Promise((res) => c.once("reconnected", res));
    await d.start();
    await reconnected;

    const err = await errorOf(subGone);
    assert.ok(err instanceof StreamLostError, `a typed error ends the stream: ${String(err)}`);
    assert.equal(err.sessionId, gone);
    assert.equal(err.reason, "session_not_found");
    // The other stream and the hold carry on over the same connection.
    const { turnId } = await c.send({ sessionId: kept, text: "still here" });
    const evs = await untilTurnCompleted(subKept, turnId);
    assert.equal(deltaText(evs, turnId), "echo: still here");
    assert.equal(gapless(evs), undefined);
    assert.deepEqual((await c.get(kept)).holders, ["desk:k"]);
    assert.equal(reconnects, 1, "one reconnect, not a loop");
    subKept.close();
  } finally {
    c.close();
  }
});


test("a restore that keeps failing counts as a failed attempt: the delay doubles and maxAttempts ends it on the stream", T, async () => {
  const dir = mkdtempSync(join(tmpdir(), "sdrc-"));
  const accepted: number[] = [];
  let healthy = false;
  let first: Socket | undefined;
  let tooMany: () => void = () => undefined;
  const looping = new Promise<void>((res) => (tooMany = res));
  const srv = await fakePeer(join(dir, "f.sock"), (s, conn, m) => {
    if (m.method === "initialize") {
      if (accepted.length < conn) accepted.push(Date.now());
      if (conn > 4 && !healthy) tooMany();
      return void s.write(frame({ jsonrpc: "2.0", id: m.id, result: INIT }));
    }
    if (conn === 1) first = s;
    if (m.method === "agentSession.attach" && (conn === 1 || healthy)) {
      return void s.write(frame({ jsonrpc: "2.0", id: m.id, result: { subscriptionId: "s-1", events: [], lastSeq: 0, hasMore: false } }));
    }
    if (healthy) return void s.write(frame({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: 1, pid: 1 } }));
    s.destroy(); // initialize answered, the restore's attach cut off
  });
  const c = await SessiondClient.connect({ socketPath: join(dir, "f.sock"), reconnect: { initialDelayMs: 40, maxDelayMs: 10_000, maxAttempts: 3 } });
  try {
    const sub = await c.attach("s-aaaaaaaa");
    const gaveUp = new Promise<unknown>((res) => c.once("error", res));
    first!.destroy();
    const outcome = await Promise.race([errorOf(sub), looping.then(() => "reconnecting past maxAttempts")]);
    assert.ok(outcome instanceof ConnectionClosedError, `the stream ends with the typed error: ${String(outcome)}`);
    assert.ok((await gaveUp) instanceof ConnectionClosedError, "the client reports it gave up");
    assert.equal(accepted.length, 4, "the first connection and maxAttempts=3 reconnections");
    // Jittered 0.75 .. 1.25 × 40, 80, 160 ms: each wait is at least 3/4 of
    // its doubled delay (a lower bound: a loaded machine only adds to it).
    for (const [i, min] of [30, 60, 120].entries()) {
      assert.ok(accepted[i + 1]! - accepted[i]! >= min, `attempt ${i + 1} waited ${accepted[i + 1]! - accepted[i]!} ms, want >= ${min}`);
    }
    // The rest of the client keeps working: a new call connects again.
    healthy = true;
    assert.equal((await c.status()).protocolVersion, 1);
  } finally {
    c.close();
    srv.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("holds whose ttl ran out leave the client; a reconnect takes only the live ones again", T, async () => {
  const c = await SessiondClient.connect({ socketPath: d.socket, reconnect: { initialDelayMs: 20, maxDelayMs: 200 } });
  try {
    const id = (await c.create({ provider: "echo", cwd: d.dir })).sessionId;
    await c.hold({ sessionId: id, holderId: "keep" });
    for (let i = 0; i < 20; i++) await c.hold({ sessionId: id, holderId: `t:${i}`, ttlMs: 200 });
    // Wait (on the daemon's state) until their ttl dropped them.
    while ((await c.get(id)).holders.length > 1) await new Promise((r) => setTimeout(r, 50));
    assert.equal(c.heldCount, 1, "the expired holds left the client");
    assert.equal(c.holdToken(id, "t:0"), undefined);
    assert.ok(c.holdToken(id, "keep"));
    const reconnected = new Promise((res) => c.once("reconnected", res));
    await d.kill("SIGKILL");
    await d.start();
    await reconnected;
    assert.deepEqual((await c.get(id)).holders, ["keep"]);
  } finally {
    c.close();
  }
});

test("the client refuses a socket whose directory is not private, naming the path and the problem", T, async () => {
  const dir = mkdtempSync(join(tmpdir(), "sdus-"));
  const run = join(dir, "run");
  const srv = await fakePeer(join(dir, "s.sock"), (s, _conn, m) => void s.write(frame({ jsonrpc: "2.0", id: m.id, result: INIT })));
  try {
    mkdirSync(run, { mode: 0o700 });
    const path = join(run, "s.sock");
    symlinkSync(join(dir, "s.sock"), path);
    // A private directory: the client connects (the peer answers initialize).
    (await SessiondClient.connect({ socketPath: path, reconnect: false })).close();
    chmodSync(run, 0o755);
    await assert.rejects(SessiondClient.connect({ socketPath: path, reconnect: false }), (e: unknown) =>
      e instanceof UnsafeSocketError && e.socketPath === path && /mode 0755, open to group or others/.test(e.message));
    await assert.rejects(ensureDaemon({ socketPath: path, stateDir: join(dir, "state"), binary: "/nonexistent" }), UnsafeSocketError);
    // A symlinked directory is no directory of ours either.
    chmodSync(run, 0o700);
    symlinkSync(run, join(dir, "link"));
    await assert.rejects(SessiondClient.connect({ socketPath: join(dir, "link", "s.sock"), reconnect: false }), (e: unknown) =>
      e instanceof UnsafeSocketError && /is not a directory/.test(e.message));
  } finally {
    srv.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the high-water mark counts bytes: a slow consumer of large events pauses the socket, lags and recovers without a gap", T, async () => {
  // Past 256 KiB of queued events the socket pauses; the event count alone
  // (1e9) would never pause it.
  const c = await SessiondClient.connect({ socketPath: d.socket, highWaterMarkBytes: 256 << 10, highWaterMark: 1e9 });
  const watcher = await SessiondClient.connect({ socketPath: d.socket });
  try {
    const id = (await c.create({ provider: "echo", cwd: d.dir })).sessionId;
    await c.hold({ sessionId: id, holderId: "desk:w1" });
    const slow = await c.attach(id);
    const fast = await watcher.attach(id);
    const { turnId } = await c.send({ sessionId: id, text: "/flood 3000 4000" });
    await untilTurnCompleted(fast, turnId); // the whole turn is journaled, slow has read nothing
    fast.close();
    const evs = await untilTurnCompleted(slow, turnId);
    assert.equal(gapless(evs), undefined);
    assert.equal(evs[0]!.seq, 1);
    assert.ok(slow.reattaches >= 1, "the daemon lagged the subscription and the client re-attached");
    assert.equal(deltaText(evs, turnId).length, 3000 * 4000);
    slow.close();
  } finally {
    c.close();
    watcher.close();
  }
});

test("calls while the daemon is down: connect fails at once with DaemonUnavailableError; a connected client's calls wait across the reconnect until unavailableMs after it found no daemon, then fail typed naming the socket and how to start it; served once it is back", T, async () => {
  const d2 = await Daemon.start();
  const c = await SessiondClient.connect({ socketPath: d2.socket, timeoutMs: 120_000, reconnect: { initialDelayMs: 20, maxDelayMs: 100, unavailableMs: 300 } });
  const unavailable = (method: string) => (e: unknown) => e instanceof DaemonUnavailableError && e.reason === "daemon_unavailable" &&
    e.socketPath === d2.socket && e.method === method && e.message.includes(d2.socket) && /sessiond serve/.test(e.message);
  try {
    await c.list();
    await d2.kill("SIGKILL");
    // The call timeout (120 s) is past the test's: only the unavailableMs
    // bound ends this wait.
    await assert.rejects(c.list(), unavailable("agentSession.list"));
    await assert.rejects(c.get("x"), unavailable("agentSession.get"), "at once while it stays down");
    await assert.rejects(SessiondClient.connect({ socketPath: d2.socket, reconnect: false }), unavailable("connect"));
    const back = new Promise((res) => c.once("reconnected", res));
    await d2.start();
    await back;
    assert.ok(Array.isArray((await c.list()).sessions), "served after the restart");
    // A restart shorter than unavailableMs is waited across.
    const c2 = await SessiondClient.connect({ socketPath: d2.socket, timeoutMs: 120_000, reconnect: { initialDelayMs: 20, maxDelayMs: 100, unavailableMs: 60_000 } });
    try {
      const disc = new Promise((res) => c2.once("disconnected", res));
      await d2.kill("SIGKILL");
      await disc;
      const waiting = c2.list();
      await d2.start();
      assert.ok(Array.isArray((await waiting).sessions), "the call waited across the reconnect");
    } finally {
      c2.close();
    }
  } finally {
    c.close();
    await d2.stop();
  }
});
