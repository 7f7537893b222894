// One bad call fails alone; sends always carry a clientMessageId; close()
// during a reconnect lets the process exit; an oversized daemon message
// ends the link with a typed error.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Server, Socket } from "node:net";
import { Daemon } from "./daemon.js";
import { INIT, fakePeer, frame } from "./fake.js";
import { untilTurnCompleted } from "./helpers.js";
import { SessiondClient, AbortError, ClientClosedError, BadAnswerError, ConnectionClosedError, InvalidParamsError, MessageTooLargeError } from "../src/index.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };
let d: Daemon;

before(async () => {
  d = await Daemon.start();
});
after(async () => {
  await d?.stop();
});

/** A fake daemon on a private temp dir; stopped by t.after. */
async function fake(t: { after(fn: () => void | Promise<void>): void },
  answer: (s: Socket, conn: number, m: { id: number; method: string; params?: Record<string, unknown> }) => void): Promise<{ sock: string; srv: Server }> {
  const dir = mkdtempSync(join(tmpdir(), "sdhf-"));
  const sock = join(dir, "f.sock");
  const socks = new Set<Socket>();
  const srv = await fakePeer(sock, (s, conn, m) => {
    socks.add(s);
    answer(s, conn, m as never);
  });
  t.after(async () => {
    for (const s of socks) s.destroy();
    await new Promise<void>((r) => srv.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  });
  return { sock, srv };
}

test("a call whose params cannot be sent fails alone with a typed error; the connection stays and nothing is retried", T, async () => {
  const c = await SessiondClient.connect({ socketPath: d.socket });
  let drops = 0;
  c.on("disconnected", () => drops++);
  try {
    const { sessionId } = await c.create({ provider: "echo", cwd: d.dir });
    await c.hold({ sessionId, holderId: "h" });
    const circ: Record<string, unknown> = {};
    circ.self = circ;
    let deep: unknown = [];
    for (let i = 0; i < 20_000; i++) deep = [deep]; // over the daemon's 10k nesting
    const bad: Array<[string, () => Promise<unknown>, (e: unknown) => boolean]> = [
      ["bigint", () => c.call("agentSession.get", { sessionId, x: 1n } as never), (e) => e instanceof InvalidParamsError && /BigInt/i.test(e.message)],
      ["circular", () => c.call("agentSession.get", { sessionId, x: circ } as never), (e) => e instanceof InvalidParamsError && /circular/i.test(e.message)],
      ["deep", () => c.call("agentSession.hold", { sessionId, holderId: "h2", x: deep } as never), (e) => e instanceof InvalidParamsError && /maxParamsDepth/.test(e.message)],
      ["large send", () => c.send({ sessionId, text: "x".repeat(1 << 20) }),
        (e) => e instanceof MessageTooLargeError && e.limit === 1 << 20 && e.bytes > 1 << 20 && /maxMessageBytes/.test(e.message)],
      // 1e5 is 3 bytes in JSON written by hand, 6 once serialised.
      ["grows", () => c.call("agentSession.get", { sessionId, x: new Array(200_000).fill(1e5) } as never), (e) => e instanceof MessageTooLargeError],
    ];
    for (const [name, call, check] of bad) {
      await assert.rejects(call(), check, name);
      assert.equal(drops, 0, `${name}: the connection was not dropped`);
    }
    const info = await c.get(sessionId);
    assert.deepEqual(info.holders, ["h"], "the hold was never re-taken (no reconnect)");
    const sub = await c.attach(sessionId);
    const { turnId } = await c.send({ sessionId, text: "still works" });
    await untilTurnCompleted(sub, turnId);
    assert.equal(drops, 0);
  } finally {
    c.close();
  }
});

test("a limit set lower fails the call before it is written", T, async () => {
  const c = await SessiondClient.connect({ socketPath: d.socket, maxMessageBytes: 2048 });
  try {
    const { sessionId } = await c.create({ provider: "echo", cwd: d.dir });
    await assert.rejects(c.send({ sessionId, text: "y".repeat(4096) }), (e: unknown) => e instanceof MessageTooLargeError && e.limit === 2048);
    assert.equal((await c.get(sessionId)).sessionId, sessionId);
  } finally {
    c.close();
  }
});

test("send and call(agentSession.send) always carry a clientMessageId, also when given empty", T, async (t) => {
  const seen: unknown[] = [];
  const { sock } = await fake(t, (s, _conn, m) => {
    if (m.method === "initialize") s.write(frame({ jsonrpc: "2.0", id: m.id, result: INIT }));
    else {
      seen.push(m.params?.clientMessageId);
      s.write(frame({ jsonrpc: "2.0", id: m.id, result: { turnId: `t-${seen.length}`, duplicate: false } }));
    }
  });
  const c = await SessiondClient.connect({ socketPath: sock });
  try {
    await c.call("agentSession.send", { sessionId: "s-00000001", text: "a" });
    await c.send({ sessionId: "s-00000001", text: "b", clientMessageId: "" });
    await c.call("agentSession.send", { sessionId: "s-00000001", text: "c", clientMessageId: "" });
    await c.send({ sessionId: "s-00000001", text: "d", clientMessageId: "mine" });
  } finally {
    c.close();
  }
  assert.equal(seen.length, 4);
  for (const id of seen.slice(0, 3)) assert.ok(typeof id === "string" && id.length > 0, `generated id: ${String(id)}`);
  assert.equal(new Set(seen).size, 4);
  assert.equal(seen[3], "mine");
});

test("close() while a reconnect waits for initialize: nothing is re-installed and the process exits", T, async (t) => {
  let closedLate = 0;
  const { sock } = await fake(t, (s, conn, m) => {
    if (m.method !== "initialize") return;
    if (conn === 1) {
      s.write(frame({ jsonrpc: "2.0", id: m.id, result: INIT }));
      setImmediate(() => s.destroy());
    } else {
      // Answered only once the child said it closed (on its stdout).
      pendingInit.push(() => {
        if (!s.destroyed) s.write(frame({ jsonrpc: "2.0", id: m.id, result: INIT }));
        else closedLate++;
      });
      flush();
    }
  });
  const pendingInit: Array<() => void> = [];
  let childClosed = false;
  const flush = () => {
    if (childClosed) for (const f of pendingInit.splice(0)) f();
  };
  let attempts = 0;
  let reconnecting: () => void = () => undefined;
  const gotAttempt = new Promise<void>((r) => (reconnecting = r));
  const src = `
    const { SessiondClient } = await import(${JSON.stringify(new URL("../src/index.js", import.meta.url).href)});
    const c = await SessiondClient.connect({ socketPath: ${JSON.stringify(sock)}, reconnect: { initialDelayMs: 1, maxDelayMs: 1 } });
    c.on("reconnected", () => console.log("reconnected"));
    c.on("reconnecting", () => console.log("reconnecting"));
    process.stdin.once("data", () => { c.close(); console.log("closed"); process.stdin.destroy(); });
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", src], { stdio: ["pipe", "pipe", "inherit"] });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  let out = "";
  child.stdout!.on("data", (b: Buffer) => {
    out += b.toString();
    if (out.includes("reconnecting") && !attempts++) reconnecting();
    if (out.includes("closed") && !childClosed) {
      childClosed = true;
      flush();
    }
  });
  await gotAttempt;
  child.stdin!.write("close\n");
  // Only exit settles this: a hang is the test's timeout.
  assert.equal(await exited, 0);
  assert.doesNotMatch(out, /reconnected/);
  void closedLate;
});

test("a daemon message over maxIncomingMessageBytes ends the link with a typed error before its body is read", T, async (t) => {
  const { sock } = await fake(t, (s, _conn, m) => {
    if (m.method === "initialize") return void s.write(frame({ jsonrpc: "2.0", id: m.id, result: INIT }));
    // Announces 300 MiB and sends 8 MiB of it.
    s.write(`Content-Length: ${300 << 20}\r\n\r\n{"jsonrpc":"2.0","id":${m.id},"result":"`);
    s.write("z".repeat(8 << 20));
  });
  const c = await SessiondClient.connect({ socketPath: sock, reconnect: false, maxIncomingMessageBytes: 4 << 20 });
  try {
    await assert.rejects(c.status({ timeoutMs: 600_000 }), (e: unknown) => e instanceof ConnectionClosedError &&
      e.cause instanceof MessageTooLargeError && e.cause.bytes === 300 << 20 && e.cause.limit === 4 << 20);
  } finally {
    c.close();
  }
});

test("a result that is not an object (null) fails the call with BadAnswerError, not a TypeError; the connection carries on", T, async (t) => {
  const { sock } = await fake(t, (s, _conn, m) => {
    if (m.method === "initialize") return void s.write(frame({ jsonrpc: "2.0", id: m.id, result: INIT }));
    if (m.method === "daemon.status") return void s.write(frame({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: 1 } }));
    s.write(frame({ jsonrpc: "2.0", id: m.id, result: m.method === "agentSession.get" ? [] : null }));
  });
  const c = await SessiondClient.connect({ socketPath: sock, reconnect: false });
  let drops = 0;
  c.on("disconnected", () => drops++);
  try {
    await assert.rejects(c.hold({ sessionId: "s-00000001", holderId: "h" }), (e: unknown) => e instanceof BadAnswerError && /not an object: null/.test(e.message));
    await assert.rejects(c.attach("s-00000001"), (e: unknown) => e instanceof BadAnswerError);
    await assert.rejects(c.get("s-00000001"), (e: unknown) => e instanceof BadAnswerError);
    assert.equal(c.heldCount, 0);
    assert.equal((await c.status()).protocolVersion, 1);
    assert.equal(drops, 0);
  } finally {
    c.close();
  }
});

test("while reconnecting, a call's AbortSignal and close() end it at once", T, async (t) => {
  const { sock } = await fake(t, (s, conn, m) => {
    if (m.method !== "initialize") return;
    if (conn === 1) {
      s.write(frame({ jsonrpc: "2.0", id: m.id, result: INIT }));
      setImmediate(() => s.destroy());
    } // later connections: initialize is never answered
  });
  const c = await SessiondClient.connect({ socketPath: sock, timeoutMs: 3_600_000, reconnect: { initialDelayMs: 1, maxDelayMs: 1 } });
  await new Promise((r) => c.once("reconnecting", r));
  const ac = new AbortController();
  const aborted = assert.rejects(c.status({ signal: ac.signal }), (e: unknown) => e instanceof AbortError);
  ac.abort();
  await aborted;
  const closed = assert.rejects(c.status(), (e: unknown) => e instanceof ClientClosedError);
  c.close();
  await closed;
});
