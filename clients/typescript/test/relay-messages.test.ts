// The relay's answers to malformed phone messages, and its check of the
// token file's directory.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Daemon } from "./daemon.js";
import { Phone, RpcError } from "./phone.js";
import { startRelay, type Relay } from "../relay/relay.js";
import { SessiondClient } from "../src/index.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };
let d: Daemon;
let relay: Relay;
let dir: string;
const logs: Array<{ msg: string; fields: Record<string, unknown> }> = [];
let logWaiters: Array<() => void> = [];

before(async () => {
  d = await Daemon.start();
  dir = mkdtempSync(join(tmpdir(), "sdrm-"));
  relay = await startRelay({
    port: 0, socketPath: d.socket, tokenFile: join(dir, "relay", "token"),
    log: (msg, fields) => {
      logs.push({ msg, fields });
      for (const w of logWaiters.splice(0)) w();
    },
  });
});
after(async () => {
  await relay?.close();
  await d?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function logged(msg: string): Promise<Record<string, unknown>> {
  for (;;) {
    const l = logs.find((x) => x.msg === msg);
    if (l) return l.fields;
    await new Promise<void>((r) => logWaiters.push(r));
  }
}

test("array or scalar params are refused -32602 naming the problem; a batch is named unsupported; the phone stays", T, async () => {
  const p = await Phone.connect(relay.url, relay.token);
  try {
    await assert.rejects(p.call("agentSession.get", ["s-00000001"]), (e: unknown) =>
      e instanceof RpcError && e.code === -32602 && e.data.reason === "invalid_params" && e.data.field === "params" &&
      /params of agentSession\.get must be an object \(by name\), not an array/.test(e.message));
    await assert.rejects(p.call("agentSession.list", 7), (e: unknown) =>
      e instanceof RpcError && e.code === -32602 && /not number/.test(e.message));
    await assert.rejects(p.call("agentSession.list", null), (e: unknown) =>
      e instanceof RpcError && e.code === -32602 && /not null/.test(e.message));
    const batch = JSON.stringify([{ jsonrpc: "2.0", id: 1, method: "agentSession.list", params: {} }]);
    await assert.rejects(p.raw(batch), (e: unknown) =>
      e instanceof RpcError && e.code === -32600 && e.data.reason === "batch_not_supported" && /batches are not supported/.test(e.message));
    const l = await p.call<{ sessions: unknown[] }>("agentSession.list");
    assert.ok(Array.isArray(l.sessions), "the phone is still served");
  } finally {
    await p.drop();
  }
});

test("a notification of a session method is not run: logged once per phone, the count logged when it goes", T, async () => {
  const p = await Phone.connect(relay.url, relay.token);
  const note = JSON.stringify({ jsonrpc: "2.0", method: "agentSession.create", params: { provider: "echo", cwd: d.dir } });
  const before = (await p.call<{ sessions: unknown[] }>("agentSession.list")).sessions.length;
  for (let i = 0; i < 3; i++) p.ws.send(note);
  // Frames are handled in order: the answer to this call comes after
  // the notifications were.
  const after = (await p.call<{ sessions: unknown[] }>("agentSession.list")).sessions.length;
  assert.equal(after, before, "no session was created");
  const first = await logged("phone notification dropped");
  assert.equal(first.method, "agentSession.create");
  assert.equal(logs.filter((l) => l.msg === "phone notification dropped").length, 1, "logged once");
  await p.drop();
  const total = await logged("phone notifications dropped");
  assert.equal(total.count, 3);
  assert.equal(total.phone, first.phone);
});

test("a token file whose directory is writable by others, another user's, or not a directory is refused, naming it and the problem", T, async () => {
  const base = mkdtempSync(join(tmpdir(), "sdtd-"));
  try {
    const open = join(base, "open");
    mkdirSync(open, { mode: 0o700 });
    writeFileSync(join(open, "token"), "x".repeat(43) + "\n", { mode: 0o600 });
    chmodSync(open, 0o777);
    await assert.rejects(startRelay({ port: 0, socketPath: d.socket, tokenFile: join(open, "token") }), (e: unknown) =>
      e instanceof Error && e.message.includes(`directory ${open} has mode 0777, writable by group or others`));
    chmodSync(open, 0o775); // group-writable too
    await assert.rejects(startRelay({ port: 0, socketPath: d.socket, tokenFile: join(open, "new") }), /has mode 0775, writable by group or others/);
    assert.equal(existsSync(join(open, "new")), false, "no token is created there");
    chmodSync(open, 0o755); // readable is fine: the file is 0600
    const ok = await startRelay({ port: 0, socketPath: d.socket, tokenFile: join(open, "token") });
    await ok.close();
    if (process.geteuid?.() === 0) {
      chownSync(open, 65534, 65534);
      await assert.rejects(startRelay({ port: 0, socketPath: d.socket, tokenFile: join(open, "token") }), (e: unknown) =>
        e instanceof Error && e.message.includes(`directory ${open} is owned by uid 65534`));
    }
    symlinkSync(open, join(base, "link"));
    await assert.rejects(startRelay({ port: 0, socketPath: d.socket, tokenFile: join(base, "link", "token") }), /link is not a directory \(a symlink\)/);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});

test("phone churn (connect, attach, drop, also mid-attach) leaves no daemon connection behind; the relay serves on", T, async () => {
  const direct = await SessiondClient.connect({ socketPath: d.socket });
  try {
    const id = (await direct.create({ provider: "echo", cwd: d.dir })).sessionId;
    const base = (await direct.status()).connections;
    for (let i = 0; i < 30; i++) {
      const p = await Phone.connect(relay.url, relay.token, `churn-${i % 3}`);
      const att = p.call("agentSession.attach", { sessionId: id });
      if (i % 2 === 0) await att;
      else att.catch(() => undefined); // dropped before the answer
      await p.drop();
    }
    const p = await Phone.connect(relay.url, relay.token, "churn-0");
    const h = await p.call<{ holdToken: string }>("agentSession.hold", { sessionId: id, holderId: "churn" });
    await p.call("agentSession.attach", { sessionId: id });
    const { turnId } = await p.call<{ turnId: string }>("agentSession.send", { sessionId: id, text: "after the churn" });
    await p.until((e) => e.type === "turn.completed" && e.turnId === turnId);
    await p.call("agentSession.release", { sessionId: id, holderId: "churn", holdToken: h.holdToken });
    await p.drop();
    // Every phone's daemon connection is closed (the daemon counts them
    // as it sees them go: poll its state, no timing assumed).
    while ((await direct.status()).connections > base) await new Promise((r) => setTimeout(r, 20));
  } finally {
    direct.close();
  }
});
