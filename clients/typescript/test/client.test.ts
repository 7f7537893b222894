import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { createServer, type Server } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { Daemon, sessiondBinary } from "./daemon.js";
import { untilTurnCompleted, until, deltaText, gapless } from "./helpers.js";
import {
  SessiondClient, SessiondError, ConnectionClosedError, TimeoutError, AbortError, resolveSocketPath,
  type Event, type Subscription,
} from "../src/index.js";

function frame(m: object): string {
  const b = JSON.stringify(m);
  return `Content-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`;
}

const pkgRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
let d: Daemon;
/** Per-test bound: a hang is a failure, not a stuck run. */
const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };

before(async () => {
  d = await Daemon.start();
});
after(async () => {
  await d?.stop();
});

async function session(c: SessiondClient): Promise<string> {
  const s = await c.create({ provider: "echo", cwd: d.dir, title: "ts" });
  return s.sessionId;
}

test("generated artefacts: openrpc.json is the daemon's document and regenerating the types changes nothing", T, () => {
  const doc = execFileSync(sessiondBinary(), ["openrpc"], { encoding: "utf8" });
  const checkedIn = execFileSync("cat", [join(pkgRoot, "openrpc.json")], { encoding: "utf8" });
  assert.equal(doc, checkedIn, "openrpc.json is stale: sessiond openrpc > openrpc.json");
  execFileSync(process.execPath, [join(pkgRoot, "scripts", "gen-types.mjs"), "--check"], { stdio: "inherit" });
});

test("socket path is resolved as the daemon resolves it", T, () => {
  assert.equal(resolveSocketPath("/x/s.sock", {}), "/x/s.sock");
  assert.equal(resolveSocketPath(undefined, { SESSIOND_SOCKET: "/a/b", XDG_RUNTIME_DIR: "/r" }), "/a/b");
  assert.equal(resolveSocketPath(undefined, { XDG_RUNTIME_DIR: "/run/user/7" }), "/run/user/7/sessiond/sessiond.sock");
  assert.equal(resolveSocketPath(undefined, {}), `/tmp/sessiond-${process.getuid!()}/sessiond.sock`);
});

test("handshake and capability gating", T, async () => {
  const c = await SessiondClient.connect({ socketPath: d.socket, capabilities: ["agent-session.attach.v1"] });
  try {
    assert.ok(c.server.capabilities.includes("agent-session.turns.v1"));
    assert.match(c.server.connectionId, /^c-/);
    const doc = await c.discover();
    assert.equal((doc as { openrpc: string }).openrpc, "1.3.2");
    const id = await session(c);
    await assert.rejects(c.send({ sessionId: id, text: "hi" }), (e: unknown) =>
      e instanceof SessiondError && e.code === -32601 && e.reason === "capability_not_negotiated" &&
      e.data.capability === "agent-session.turns.v1");
    await assert.rejects(c.get("nope-nope-nope"), (e: unknown) => e instanceof SessiondError && e.reason === "session_not_found");
  } finally {
    c.close();
  }
});

test("create, hold, send, stream, release", T, async () => {
  const c = await SessiondClient.connect({ socketPath: d.socket });
  try {
    const id = await session(c);
    const h = await c.hold({ sessionId: id, holderId: "desk:w1" });
    assert.equal(h.state, "live");
    assert.ok(h.holdToken);
    const sub = await c.attach(id);
    const { turnId, duplicate } = await c.send({ sessionId: id, text: "hello" });
    assert.equal(duplicate, false);
    const evs = await untilTurnCompleted(sub, turnId);
    assert.equal(deltaText(evs, turnId), "echo: hello");
    assert.equal(gapless(evs), undefined);
    assert.equal(evs[0]!.seq, 1);
    const started = evs.find((e) => e.type === "turn.started")!;
    assert.ok((started.data as { clientMessageId?: string }).clientMessageId, "send carries an automatic clientMessageId");
    sub.close();
    const r = await c.release({ sessionId: id, holderId: "desk:w1" });
    assert.equal(r.released, true);
    assert.deepEqual(r.holders, []);
  } finally {
    c.close();
  }
});

test("an approval answered through the client", T, async () => {
  const c = await SessiondClient.connect({ socketPath: d.socket });
  try {
    const id = await session(c);
    await c.hold({ sessionId: id, holderId: "desk:w1" });
    const sub = await c.attach(id);
    const { turnId } = await c.send({ sessionId: id, text: "do it /approve" });
    const seen: Event[] = [];
    const req = await until(sub, (e) => e.type === "approval.requested", seen);
    const data = req.data as { requestId: string; options: string[] };
    assert.ok(data.options.includes("approveForSession"));
    await c.respond({ sessionId: id, requestId: data.requestId, decision: "approve" });
    const evs = await untilTurnCompleted(sub, turnId, seen);
    assert.equal(deltaText(evs, turnId), "echo: do it /approve");
    assert.ok(evs.some((e) => e.type === "approval.resolved"));
    sub.close();
  } finally {
    c.close();
  }
});

test("AbortSignal and timeouts reject the call", T, async () => {
  const c = await SessiondClient.connect({ socketPath: d.socket });
  try {
    const id = await session(c);
    const ac = new AbortController();
    const p = c.hold({ sessionId: id, holderId: "a" }, { signal: ac.signal });
    ac.abort();
    await assert.rejects(p, AbortError);
    await assert.rejects(c.status({ timeoutMs: 0 }), TimeoutError);
    assert.equal((await c.status()).protocolVersion, 1);
    // A peer that answers initialize and then nothing: the call times out.
    const dir = mkdtempSync(join(tmpdir(), "sdq-"));
    const path = join(dir, "q.sock");
    const srv: Server = createServer((s) => {
      s.once("data", () => s.write(frame({ jsonrpc: "2.0", id: 0, result: { protocolVersion: 1, server: { name: "x", version: "0" }, capabilities: [], connectionId: "c-1" } })));
    });
    await new Promise<void>((r) => srv.listen(path, r));
    const q = await SessiondClient.connect({ socketPath: path, reconnect: false });
    try {
      await assert.rejects(q.status({ timeoutMs: 50 }), TimeoutError);
    } finally {
      q.close();
      srv.close();
      rmSync(dir, { recursive: true, force: true });
    }
  } finally {
    c.close();
  }
});

test("daemon SIGKILLed mid-turn: the client reconnects, sees daemon_restart, re-holds and continues", T, async () => {
  const c = await SessiondClient.connect({ socketPath: d.socket, reconnect: { initialDelayMs: 20, maxDelayMs: 200 } });
  try {
    const id = await session(c);
    const h1 = await c.hold({ sessionId: id, holderId: "desk:w1" });
    const sub = await c.attach(id);
    const { turnId } = await c.send({ sessionId: id, text: "/sleep 600000" });
    const seen: Event[] = [];
    await until(sub, (e) => e.type === "turn.started", seen);
    const reconnected = new Promise((res) => c.once("reconnected", res));
    await d.kill("SIGKILL");
    await d.start();
    await reconnected;
    const evs = await untilTurnCompleted(sub, turnId, seen);
    const done = evs.at(-1)!.data as { status: string; reason: string };
    assert.deepEqual([done.status, done.reason], ["interrupted", "daemon_restart"]);
    const h2 = c.holdToken(id, "desk:w1");
    assert.ok(h2 && h2 !== h1.holdToken, "re-held with a new holdToken");
    const info = await c.get(id);
    assert.deepEqual(info.holders, ["desk:w1"]);
    assert.equal(info.state, "live");
    const t2 = await c.send({ sessionId: id, text: "again" });
    const more = await untilTurnCompleted(sub, t2.turnId, evs);
    assert.equal(deltaText(more, t2.turnId), "echo: again");
    assert.equal(gapless(more), undefined);
    assert.equal(more[0]!.seq, 1);
    sub.close();
  } finally {
    c.close();
  }
});

test("a slow consumer that lags recovers without a gap", T, async () => {
  const c = await SessiondClient.connect({ socketPath: d.socket, highWaterMark: 32 });
  const watcher = await SessiondClient.connect({ socketPath: d.socket });
  try {
    const id = await session(c);
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
    const text = deltaText(evs, turnId);
    assert.equal(text.length, 3000 * 4000);
    slow.close();
  } finally {
    c.close();
    watcher.close();
  }
});

test("a daemon that answers garbage or closes mid-call rejects pending calls with a typed error", T, async () => {
  const dir = mkdtempSync(join(tmpdir(), "sdg-"));
  const path = join(dir, "g.sock");
  let mode = "garbage";
  const srv: Server = createServer((s) => {
    let n = 0;
    s.on("data", () => {
      n++;
      if (mode === "garbage") s.write("Content-Length: 5\r\n\r\nxx{{}");
      else if (mode === "close" || n > 1) s.destroy();
      else s.write(frame({ jsonrpc: "2.0", id: 0, result: { protocolVersion: 1, server: { name: "x", version: "0" }, capabilities: [], connectionId: "c-1" } }));
    });
  });
  await new Promise<void>((r) => srv.listen(path, r));
  try {
    await assert.rejects(SessiondClient.connect({ socketPath: path, reconnect: false }), ConnectionClosedError);
    mode = "close";
    await assert.rejects(SessiondClient.connect({ socketPath: path, reconnect: false }), ConnectionClosedError);
    mode = "close-mid-call";
    const c = await SessiondClient.connect({ socketPath: path, reconnect: false });
    await assert.rejects(c.status(), ConnectionClosedError);
    c.close();
  } finally {
    srv.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
