// Per-stream backpressure (a stalled stream pauses alone), the async
// iterator protocol under concurrent next(), and attaches given up by their
// caller leaving nothing subscribed on the daemon.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Socket } from "node:net";
import { Daemon } from "./daemon.js";
import { INIT, fakePeer, frame } from "./fake.js";
import { deltaText, gapless, untilTurnCompleted } from "./helpers.js";
import { SessiondClient, AbortError, ConnectionClosedError, TimeoutError, type Event } from "../src/index.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };
let d: Daemon;

before(async () => {
  d = await Daemon.start();
});
after(async () => {
  await d?.stop();
});

type Msg = { id: number; method: string; params?: Record<string, unknown> };

/** A fake daemon on a private temp dir; stopped by t.after. */
async function fake(t: { after(fn: () => void | Promise<void>): void }, answer: (s: Socket, conn: number, m: Msg) => void): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "sdsf-"));
  const sock = join(dir, "f.sock");
  const socks = new Set<Socket>();
  const srv = await fakePeer(sock, (s, conn, m) => {
    socks.add(s);
    answer(s, conn, m as Msg);
  });
  t.after(async () => {
    for (const s of socks) s.destroy();
    await new Promise<void>((r) => srv.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  });
  return sock;
}

/** A queue of values with a wait for the next one. */
class Inbox<V> {
  private items: V[] = [];
  private waiters: Array<() => void> = [];
  put(v: V): void {
    this.items.push(v);
    for (const w of this.waiters.splice(0)) w();
  }
  async take(pred: (v: V) => boolean = () => true): Promise<V> {
    for (;;) {
      const i = this.items.findIndex(pred);
      if (i >= 0) return this.items.splice(i, 1)[0]!;
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }
  get all(): V[] {
    return this.items;
  }
}

function attachAnswer(subscriptionId: string, sessionId: string) {
  return { subscriptionId, session: { sessionId }, events: [], lastSeq: 0, hasMore: false };
}

test("a stream nobody reads pauses alone: the client's calls and other streams carry on, and it resumes gapless when read", T, async () => {
  const c = await SessiondClient.connect({ socketPath: d.socket, highWaterMark: 32 });
  const watcher = await SessiondClient.connect({ socketPath: d.socket });
  try {
    const a = (await c.create({ provider: "echo", cwd: d.dir })).sessionId;
    const b = (await c.create({ provider: "echo", cwd: d.dir })).sessionId;
    await c.hold({ sessionId: a, holderId: "desk:a" });
    await c.hold({ sessionId: b, holderId: "desk:b" });
    const stalled = await c.attach(a); // not read until the end
    const seen = await watcher.attach(a);
    const paused = once(c, "streamPaused");
    const { turnId } = await c.send({ sessionId: a, text: "/flood 600 4000" });
    await untilTurnCompleted(seen, turnId); // the whole turn is journaled
    seen.close();
    const [info] = (await paused) as [{ sessionId: string; queued: number }];
    assert.equal(info.sessionId, a);
    // The same connection still answers calls and feeds another stream.
    assert.equal((await c.get(b)).sessionId, b);
    const other = await c.attach(b);
    const t2 = await c.send({ sessionId: b, text: "still flowing" });
    const evs2 = await untilTurnCompleted(other, t2.turnId);
    assert.match(deltaText(evs2, t2.turnId), /still flowing/);
    // The stalled stream holds at most its high-water mark.
    assert.ok(stalled.paused, "the stalled stream is paused");
    assert.ok(stalled.queued <= 33, `queued ${stalled.queued} events, high-water mark 32`);
    const evs = await untilTurnCompleted(stalled, turnId);
    assert.equal(gapless(evs), undefined);
    assert.equal(evs[0]!.seq, 1);
    assert.equal(deltaText(evs, turnId).length, 600 * 4000);
    assert.ok(stalled.pauses >= 1 && stalled.reattaches >= 1, "paused, then re-attached from its cursor");
    stalled.close();
    other.close();
  } finally {
    c.close();
    watcher.close();
  }
});

test("concurrent next() calls are settled in call order, one event each; close() settles every pending one", T, async () => {
  const c = await SessiondClient.connect({ socketPath: d.socket });
  try {
    const id = (await c.create({ provider: "echo", cwd: d.dir })).sessionId;
    await c.hold({ sessionId: id, holderId: "desk:n" });
    const sub = await c.attach(id);
    const pending = Array.from({ length: 3 }, () => sub.next());
    const { turnId } = await c.send({ sessionId: id, text: "hello" });
    const evs = (await Promise.all(pending)).map((r) => r.value as Event);
    assert.deepEqual(evs.map((e) => e.seq), [1, 2, 3], "each next() got the next event, in call order");
    await untilTurnCompleted(sub, turnId, evs);
    assert.equal(gapless(evs), undefined);
    const waiting = Array.from({ length: 5 }, () => sub.next());
    sub.close();
    for (const r of await Promise.all(waiting)) assert.equal(r.done, true);
  } finally {
    c.close();
  }
});

test("1000 concurrent next() calls each get their own event, in order", T, async (t) => {
  const sock = await fake(t, (s, _conn, m) => {
    if (m.method === "initialize") s.write(frame({ jsonrpc: "2.0", id: m.id, result: INIT }));
    if (m.method === "agentSession.attach") {
      s.write(frame({ jsonrpc: "2.0", id: m.id, result: attachAnswer("sub-1", "s-1") }));
      for (let seq = 1; seq <= 1000; seq++) {
        s.write(frame({ jsonrpc: "2.0", method: "agentSession.event",
          params: { subscriptionId: "sub-1", event: { seq, type: "message.delta", sessionId: "s-1", data: { text: "x" } } } }));
      }
    }
  });
  const c = await SessiondClient.connect({ socketPath: sock, reconnect: false });
  try {
    const sub = await c.attach("s-1");
    const pending = Array.from({ length: 1000 }, () => sub.next());
    const got = await Promise.all(pending);
    assert.deepEqual(got.map((r) => r.value?.seq), Array.from({ length: 1000 }, (_, i) => i + 1));
    sub.close();
  } finally {
    c.close();
  }
});

test("a stream that fails rejects every pending next()", T, async (t) => {
  const conns = new Inbox<Socket>();
  const sock = await fake(t, (s, conn, m) => {
    if (m.method === "initialize") s.write(frame({ jsonrpc: "2.0", id: m.id, result: INIT }));
    if (m.method === "agentSession.attach") {
      s.write(frame({ jsonrpc: "2.0", id: m.id, result: attachAnswer(`sub-${conn}`, "s-1") }));
      conns.put(s);
    }
  });
  const c = await SessiondClient.connect({ socketPath: sock, reconnect: false });
  try {
    const sub = await c.attach("s-1");
    const settled = Promise.allSettled(Array.from({ length: 3 }, () => sub.next()));
    (await conns.take()).destroy();
    for (const r of await settled) assert.ok(r.status === "rejected" && r.reason instanceof ConnectionClosedError, String(r.status));
  } finally {
    c.close();
  }
});

test("an attach given up (aborted, timed out) is detached when its answer comes late; one given up while reconnecting is never restored", T, async (t) => {
  const attaches = new Inbox<{ s: Socket; conn: number; m: Msg }>();
  const detaches = new Inbox<string>();
  const inits = new Inbox<() => void>();
  const sock = await fake(t, (s, conn, m) => {
    const reply = (result: unknown) => s.write(frame({ jsonrpc: "2.0", id: m.id, result }));
    if (m.method === "initialize") {
      if (conn === 1) reply(INIT);
      else inits.put(() => reply(INIT)); // the reconnect waits for the test
    }
    if (m.method === "agentSession.attach") attaches.put({ s, conn, m });
    if (m.method === "agentSession.detach") {
      detaches.put(String(m.params?.subscriptionId));
      reply({});
    }
  });
  const c = await SessiondClient.connect({ socketPath: sock, reconnect: { initialDelayMs: 1, maxDelayMs: 1 } });
  try {
    // Aborted after it was sent.
    const ac = new AbortController();
    const aborted = c.attach("s-1", { signal: ac.signal });
    const a1 = await attaches.take();
    ac.abort();
    await assert.rejects(aborted, (e: unknown) => e instanceof AbortError);
    a1.s.write(frame({ jsonrpc: "2.0", id: a1.m.id, result: attachAnswer("sub-late-1", "s-1") }));
    assert.equal(await detaches.take(), "sub-late-1");
    // Timed out.
    const timedOut = c.attach("s-1", { timeoutMs: 2000 });
    const a2 = await attaches.take();
    await assert.rejects(timedOut, (e: unknown) => e instanceof TimeoutError);
    a2.s.write(frame({ jsonrpc: "2.0", id: a2.m.id, result: attachAnswer("sub-late-2", "s-1") }));
    assert.equal(await detaches.take(), "sub-late-2");
    // Aborted while the client reconnects: the reconnect's restore does
    // not attach it.
    const reconnected = once(c, "reconnected");
    const down = once(c, "disconnected");
    a2.s.destroy();
    await down;
    const ac2 = new AbortController();
    const whileDown = c.attach("s-gone", { signal: ac2.signal });
    ac2.abort();
    await assert.rejects(whileDown, (e: unknown) => e instanceof AbortError);
    (await inits.take())();
    await reconnected;
    // A call after the restore: the restore's attaches came before it.
    const next = c.attach("s-2");
    const a3 = await attaches.take();
    assert.equal(a3.m.params?.sessionId, "s-2", "the aborted attach was not restored");
    a3.s.write(frame({ jsonrpc: "2.0", id: a3.m.id, result: attachAnswer("sub-3", "s-2") }));
    (await next).close();
    assert.equal(await detaches.take(), "sub-3");
    assert.deepEqual(attaches.all, []);
  } finally {
    c.close();
  }
});

test("an abort storm leaves no subscription behind: every attach answered after its caller gave up is detached", T, async (t) => {
  const live = new Set<string>();
  let emptied: (() => void) | undefined;
  let n = 0;
  const sock = await fake(t, (s, _conn, m) => {
    const reply = (result: unknown) => s.write(frame({ jsonrpc: "2.0", id: m.id, result }));
    if (m.method === "initialize") reply(INIT);
    if (m.method === "agentSession.attach") {
      const id = `sub-${++n}`;
      live.add(id);
      reply(attachAnswer(id, String(m.params?.sessionId)));
    }
    if (m.method === "agentSession.detach") {
      live.delete(String(m.params?.subscriptionId));
      reply({});
      if (live.size === 0) emptied?.();
    }
  });
  const c = await SessiondClient.connect({ socketPath: sock, reconnect: false });
  try {
    const calls = Array.from({ length: 400 }, (_, i) => {
      const ac = new AbortController();
      const p = c.attach(`s-${i}`, { signal: ac.signal });
      if (i % 4 === 0) ac.abort();
      else if (i % 4 === 1) queueMicrotask(() => ac.abort());
      else if (i % 4 === 2) setImmediate(() => ac.abort());
      return p;
    });
    const results = await Promise.allSettled(calls);
    for (const r of results) {
      if (r.status === "fulfilled") r.value.close();
      else assert.ok(r.reason instanceof AbortError, String(r.reason));
    }
    assert.ok(results.some((r) => r.status === "fulfilled"), "some attaches were answered in time");
    if (live.size > 0) await new Promise<void>((r) => (emptied = r));
    assert.equal(live.size, 0);
  } finally {
    c.close();
  }
});
