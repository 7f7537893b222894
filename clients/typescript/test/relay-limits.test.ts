import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Daemon } from "./daemon.js";
import { Phone, RpcError } from "./phone.js";
import { untilTurnCompleted } from "./helpers.js";
import { SessiondClient } from "../src/index.js";
import { startRelay, FRAME_MARGIN, CLOSE_NOT_READING, type Relay } from "../relay/relay.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };
let d: Daemon;
let relay: Relay;
let direct: SessiondClient;
let tokenDir: string;
const logs: Array<{ msg: string; fields: Record<string, unknown> }> = [];
let logged: () => void = () => undefined;

before(async () => {
  d = await Daemon.start();
  tokenDir = mkdtempSync(join(tmpdir(), "sdrl-"));
  relay = await startRelay({
    port: 0, socketPath: d.socket, tokenFile: join(tokenDir, "token"),
    maxInFlight: 4, maxHoldsPerPhone: 3, maxHolds: 5, maxHoldTtlMs: 10_000, holdTtlMs: 5_000,
    log: (msg, fields) => {
      logs.push({ msg, fields });
      logged();
    },
  });
  direct = await SessiondClient.connect({ socketPath: d.socket });
});
after(async () => {
  direct?.close();
  await relay?.close();
  await d?.stop();
  if (tokenDir) rmSync(tokenDir, { recursive: true, force: true });
});

async function untilLogged(msg: string): Promise<void> {
  while (!logs.some((l) => l.msg === msg)) await new Promise<void>((r) => (logged = r));
}

const refused = (limit: string, max: number) => (e: unknown) =>
  e instanceof RpcError && e.code === -32019 && e.data.reason === "limit_exceeded" && e.data.limit === limit && e.data.max === max;

// A phone that never reads does not get here by its calls: they wait while
// half of maxBufferedBytes is unread, as its streams do (relay-hostile
// "64 reads"), and the heartbeat ends it. A reply that would pass the whole
// of it does: a page of ~1 MiB against maxBufferedBytes 512 KiB.
test("a reply that would take a phone's unread output past maxBufferedBytes closes it 1008; logged once; other phones unaffected", T, async () => {
  const { sessionId } = await direct.create({ provider: "echo", cwd: d.dir });
  await direct.hold({ sessionId, holderId: "desk" });
  const sub = await direct.attach(sessionId);
  const { turnId } = await direct.send({ sessionId, text: "/flood 300 4000" }); // ~1.2 MB journal
  await untilTurnCompleted(sub, turnId);
  sub.close();
  // A relay of its own: maxInFlight (64 by default) lets the pages pile up.
  const r2 = await startRelay({ port: 0, socketPath: d.socket, tokenFile: join(tokenDir, "token"), maxBufferedBytes: 512 << 10,
    log: (msg, fields) => {
      logs.push({ msg, fields });
      logged();
    } });
  const hog = await Phone.connect(r2.url, r2.token);
  const other = await Phone.connect(r2.url, r2.token);
  try {
    hog.reading(false);
    // 60 pages of ~1 MiB, never read.
    const calls = Array.from({ length: 60 }, () =>
      hog.call("agentSession.read", { sessionId, afterSeq: 0, limit: 4096 }).catch(() => undefined));
    await untilLogged("phone closed: not reading");
    const l = await other.call<{ sessions: unknown[] }>("agentSession.list");
    assert.ok(Array.isArray(l.sessions), "another phone is served");
    hog.reading(true);
    const { code, reason } = await hog.closed;
    assert.equal(code, CLOSE_NOT_READING);
    assert.match(reason, /over 524288 bytes of unread output \(maxBufferedBytes\)/);
    void calls;
    assert.equal(logs.filter((x) => x.msg === "phone closed: not reading").length, 1, "logged once");
    assert.equal(logs.find((x) => x.msg === "phone closed: not reading")!.fields.max_buffered_bytes, 512 << 10);
  } finally {
    await hog.drop();
    await other.drop();
    await r2.close();
  }
});

test("a phone's calls past maxInFlight are refused naming the limit; the others are answered", T, async () => {
  const p = await Phone.connect(relay.url, relay.token);
  try {
    await p.call("agentSession.list"); // the phone's daemon connection is up
    d.signal("SIGSTOP"); // nothing the daemon answers while 7 calls arrive
    let calls: Array<Promise<unknown>>;
    try {
      calls = Array.from({ length: 7 }, () => p.call("agentSession.list").then(() => "ok", (e: unknown) => e));
      // The relay answers this one itself, after reading the 7 before it.
      await assert.rejects(p.call("no.such"), (e: unknown) => e instanceof RpcError && e.data.reason === "method_not_found");
    } finally {
      d.signal("SIGCONT");
    }
    const out = await Promise.all(calls);
    assert.equal(out.filter((x) => x === "ok").length, 4);
    const errs = out.filter((x) => x !== "ok");
    assert.equal(errs.length, 3);
    for (const e of errs) assert.ok(refused("phone_calls", 4)(e), String(e));
    assert.match((errs[0] as Error).message, /maxInFlight 4/);
  } finally {
    await p.drop();
  }
});

test("holds: at most maxHoldsPerPhone per phone and maxHolds in all; a ttl over maxHoldTtlMs is refused", T, async () => {
  const id = (await direct.create({ provider: "echo", cwd: d.dir })).sessionId;
  const a = await Phone.connect(relay.url, relay.token);
  const b = await Phone.connect(relay.url, relay.token);
  try {
    await assert.rejects(a.call("agentSession.hold", { sessionId: id, holderId: "a:x", ttlMs: 10_001 }), (e: unknown) =>
      e instanceof RpcError && e.code === -32602 && e.data.field === "ttlMs" && e.data.limit === 10_000);
    const tokens: Record<string, string> = {};
    for (const h of ["a:1", "a:2", "a:3"]) {
      tokens[h] = (await a.call<{ holdToken: string }>("agentSession.hold", { sessionId: id, holderId: h, ttlMs: 10_000 })).holdToken;
    }
    await assert.rejects(a.call("agentSession.hold", { sessionId: id, holderId: "a:4" }), refused("phone_holds", 3));
    await a.call("agentSession.hold", { sessionId: id, holderId: "a:3" }); // a repeat hold is no new hold
    // Another phone is not blocked by the first one's holds ...
    await b.call("agentSession.hold", { sessionId: id, holderId: "b:1" });
    await b.call("agentSession.hold", { sessionId: id, holderId: "b:2" });
    // ... up to the relay's total.
    await assert.rejects(b.call("agentSession.hold", { sessionId: id, holderId: "b:3" }), refused("relay_holds", 5));
    const r = await a.call<{ released: boolean }>("agentSession.release", { sessionId: id, holderId: "a:1", holdToken: tokens["a:1"] });
    assert.equal(r.released, true);
    await a.call("agentSession.hold", { sessionId: id, holderId: "a:4" });
    assert.deepEqual((await direct.get(id)).holders.sort(), ["phone:a:2", "phone:a:3", "phone:a:4", "phone:b:1", "phone:b:2"]);
  } finally {
    await a.drop();
    await b.drop();
  }
});

test("a frame past maxMessageBytes + FRAME_MARGIN is not read: the phone is closed 1009", T, async (t) => {
  const p = await Phone.connect(relay.url, relay.token);
  t.after(() => p.drop());
  const limit = 1 << 20;
  await assert.rejects(p.raw("x".repeat(limit + FRAME_MARGIN)), (e: unknown) => e instanceof RpcError && e.data.reason === "message_too_large");
  const answered = p.raw("x".repeat(limit + FRAME_MARGIN + 1)).then(() => "answered", () => "answered");
  const out = await Promise.race([p.closed, answered]);
  assert.equal((out as { code: number }).code, 1009, `closed, not answered: ${JSON.stringify(out)}`);
  await untilLogged("phone error");
  assert.match(String(logs.find((l) => l.msg === "phone error")!.fields.error), /Max payload size exceeded/);
});
