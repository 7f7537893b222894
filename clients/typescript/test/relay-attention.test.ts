// daemon.attention through the relay: forwarded to the phones that asked
// for it (relay.attention), of every session, attached or not.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Daemon } from "./daemon.js";
import { Phone, RpcError } from "./phone.js";
import { SessiondClient } from "../src/index.js";
import { startRelay, type Relay } from "../relay/relay.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };
let d: Daemon;
let relay: Relay;
let direct: SessiondClient;
let tokenDir: string;

before(async () => {
  d = await Daemon.start();
  tokenDir = mkdtempSync(join(tmpdir(), "sdrat-"));
  relay = await startRelay({ port: 0, socketPath: d.socket, tokenFile: join(tokenDir, "token"), log: () => {} });
  direct = await SessiondClient.connect({ socketPath: d.socket, client: { name: "desktop", version: "1.0.0" } });
});
after(async () => {
  direct?.close();
  await relay?.close();
  await d?.stop();
  if (tokenDir) rmSync(tokenDir, { recursive: true, force: true });
});

/** A turn of a new session of the desktop's, run to its end. */
async function turn(): Promise<string> {
  const id = (await direct.create({ provider: "echo", cwd: d.dir })).sessionId;
  await direct.hold({ sessionId: id, holderId: "desktop:1" });
  const sub = await direct.attach(id);
  await direct.send({ sessionId: id, text: "hi" });
  for await (const e of sub) if (e.type === "turn.completed") break;
  return id;
}

test("a phone that asked gets daemon.attention of sessions it never attached; one that turned it off gets none until it asks again", T, async () => {
  const asks = await Phone.connect(relay.url, relay.token, "asks");
  const off = await Phone.connect(relay.url, relay.token, "off");
  try {
    assert.deepEqual(await asks.call("relay.attention", {}), { on: true });
    assert.deepEqual(await off.call("relay.attention", { on: true }), { on: true });
    assert.deepEqual(await off.call("relay.attention", { on: false }), { on: false });
    const first = await turn();
    const n = await asks.notice("daemon.attention");
    assert.equal(n.sessionId, first);
    assert.equal(n.kind, "turn_completed");
    // A round trip on off's daemon connection: the first turn's notice,
    // sent to it before, has passed the relay.
    await off.call("agentSession.get", { sessionId: first });
    assert.deepEqual(await off.call("relay.attention", {}), { on: true });
    const second = await turn();
    const m = await off.notice("daemon.attention");
    assert.equal(m.sessionId, second, `off got ${JSON.stringify(off.notices)}`);
    const err = await off.call("relay.attention", { on: "yes" }).catch((e: RpcError) => e);
    assert.ok(err instanceof RpcError);
    assert.equal(err.code, -32602);
    assert.equal(err.data.field, "on");
  } finally {
    await asks.drop();
    await off.drop();
  }
});

test("a phone that asked but does not read gets no attention notice queued past half its maxBufferedBytes: dropped, logged", T, async () => {
  const { sessionId } = await direct.create({ provider: "echo", cwd: d.dir });
  await direct.hold({ sessionId, holderId: "desk" });
  const sub = await direct.attach(sessionId);
  const { turnId } = await direct.send({ sessionId, text: "/flood 300 4000" }); // ~1.2 MB journal
  for await (const e of sub) if (e.type === "turn.completed" && e.turnId === turnId) break;
  const logs: Array<{ msg: string; fields: Record<string, unknown> }> = [];
  const waiters: Array<() => void> = [];
  const logged = (msg: string) => new Promise<Record<string, unknown>>((res) => {
    const look = () => {
      const l = logs.find((x) => x.msg === msg);
      if (l) res(l.fields);
      else waiters.push(look);
    };
    look();
  });
  const max = 4 << 20;
  const r2 = await startRelay({ port: 0, socketPath: d.socket, tokenFile: join(tokenDir, "token"), maxBufferedBytes: max,
    log: (msg, fields) => {
      logs.push({ msg, fields });
      for (const w of waiters.splice(0)) w();
    } });
  const hog = await Phone.connect(r2.url, r2.token);
  try {
    assert.deepEqual(await hog.call("relay.attention", {}), { on: true });
    hog.reading(false);
    // Pages of ~1 MiB, never read, until the phone's output backs up.
    for (let i = 0; i < 40; i++) void hog.call("agentSession.read", { sessionId, afterSeq: 0, limit: 4096 }).catch(() => undefined);
    await logged("phone output backed up");
    const other = await turn();
    const f = await logged("phone attention dropped");
    assert.equal(f.session_id, other);
    assert.ok((f.buffered_bytes as number) > max / 2 - 1024, JSON.stringify(f));
    assert.equal(f.max_buffered_bytes, max);
  } finally {
    await hog.drop();
    await r2.close();
  }
});
