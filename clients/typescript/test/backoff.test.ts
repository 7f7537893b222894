// Backoff against daemons that misbehave in ways the real one does not:
// one that lags a stream again and again, one that accepts and then drops
// every connection. Played by a fake peer (test/fake.ts); waits are
// checked as lower bounds only (a loaded machine only adds to them).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Socket } from "node:net";
import { INIT, fakePeer, frame } from "./fake.js";
import { SessiondClient } from "../src/index.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };

const EVENT = { seq: 1, type: "message.delta", sessionId: "s-aaaaaaaa", turnId: "t-1", ts: "2026-01-01T00:00:00Z", data: { text: "x" } };

test("a stream the daemon lags again and again is re-attached after a doubling, bounded delay, reset by a re-attach that brings events", T, async () => {
  const dir = mkdtempSync(join(tmpdir(), "sdbo-"));
  const attaches: number[] = [];
  let settled: () => void = () => undefined;
  const done = new Promise<void>((res) => (settled = res));
  // Attach 1..5 bring nothing and are lagged at once; 6 brings an event
  // and is lagged; 7 is left alone.
  const srv = await fakePeer(join(dir, "f.sock"), (s, _conn, m) => {
    if (m.method === "initialize") return void s.write(frame({ jsonrpc: "2.0", id: m.id, result: INIT }));
    if (m.method === "agentSession.attach") {
      const n = attaches.push(Date.now());
      const subscriptionId = `s-${n}`;
      const events = n === 6 ? [EVENT] : [];
      s.write(frame({ jsonrpc: "2.0", id: m.id, result: { subscriptionId, events, lastSeq: n >= 6 ? 1 : 0, hasMore: false } }));
      if (n <= 6) s.write(frame({ jsonrpc: "2.0", method: "agentSession.lagged", params: { subscriptionId, sessionId: "s-aaaaaaaa" } }));
      else settled();
      return;
    }
    s.write(frame({ jsonrpc: "2.0", id: m.id, result: {} }));
  });
  const c = await SessiondClient.connect({ socketPath: join(dir, "f.sock"), lagRetry: { initialDelayMs: 20, maxDelayMs: 80 } });
  const delays: number[] = [];
  c.on("lagReattach", (e: { delayMs: number }) => delays.push(e.delayMs));
  try {
    const sub = await c.attach("s-aaaaaaaa");
    await done;
    assert.deepEqual(delays, [0, 20, 40, 80, 80, 0], "immediate, then doubling to the bound while nothing comes; immediate again after events");
    for (const [i, min] of [20, 40, 80, 80].entries()) {
      const waited = attaches[i + 2]! - attaches[i + 1]!;
      assert.ok(waited >= min - 2, `re-attach ${i + 3} came ${waited} ms after the one before, want >= ${min}`);
    }
    const r = await sub.next();
    assert.equal(r.value?.seq, 1, "the event the re-attach brought is delivered");
    assert.equal(sub.reattaches, 6);
    sub.close();
  } finally {
    c.close();
    srv.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a daemon that accepts and then drops every connection is retried ever more slowly; the backoff starts again only after a healthy period", T, async () => {
  const dir = mkdtempSync(join(tmpdir(), "sdbo-"));
  const inits: number[] = [];
  let last: Socket | undefined;
  const srv = await fakePeer(join(dir, "f.sock"), (s, _conn, m) => {
    if (m.method === "initialize") {
      inits.push(Date.now());
      last = s;
      return void s.write(frame({ jsonrpc: "2.0", id: m.id, result: INIT }));
    }
    s.write(frame({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: 1, pid: 1 } }));
  });
  // While the peer drops connections, healthyMs is out of reach (no stalled
  // event loop turns a dropped connection into a healthy one); the last
  // reconnect is made with a short one. The client reads its reconnect
  // options at each reconnect.
  const rc = { initialDelayMs: 40, maxDelayMs: 200, healthyMs: 600_000 };
  const c = await SessiondClient.connect({ socketPath: join(dir, "f.sock"), reconnect: rc });
  const waits: Array<{ attempt: number; delayMs: number }> = [];
  c.on("reconnecting", (e: { attempt: number; delayMs: number }) => waits.push(e));
  // Each time the client is back (initialized, restored), the peer drops it.
  const reconnected = () => new Promise<void>((res) => c.once("reconnected", () => res()));
  try {
    for (let i = 0; i < 5; i++) {
      if (i === 4) rc.healthyMs = 50;
      const back = reconnected();
      last!.destroy();
      await back;
    }
    assert.deepEqual(waits.map((w) => w.delayMs), [40, 80, 160, 200, 200], "a reconnect that dropped at once did not reset the backoff");
    assert.deepEqual(waits.map((w) => w.attempt), [1, 2, 3, 4, 5]);
    // Jittered 0.75 .. 1.25 × the delay: lower bounds only.
    for (const [i, w] of waits.entries()) {
      const waited = inits[i + 1]! - inits[i]!;
      assert.ok(waited >= 0.75 * w.delayMs - 2, `reconnect ${i + 1} waited ${waited} ms, want >= ${0.75 * w.delayMs}`);
    }
    // Left up, the connection becomes healthy: the client's healthyMs timer
    // was armed before "reconnected" was emitted, so a longer timer armed
    // now fires after it (Node runs timers in the order they are due).
    await new Promise((res) => setTimeout(res, 2 * rc.healthyMs));
    assert.equal((await c.status()).protocolVersion, 1);
    const back = reconnected();
    last!.destroy();
    await back;
    assert.deepEqual(waits.at(-1), { attempt: 1, delayMs: 40 }, "after a healthy period the backoff starts again");
  } finally {
    c.close();
    srv.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
