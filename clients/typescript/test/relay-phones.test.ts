// Phones against each other: holds, clientMessageIds, bad params, and how
// many phones one relay serves.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { spawn } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Daemon } from "./daemon.js";
import { Phone, RpcError } from "./phone.js";
import { SessiondClient } from "../src/index.js";
import { untilTurnCompleted } from "./helpers.js";
import { startRelay, type Relay } from "../relay/relay.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };
let d: Daemon;
let relay: Relay;
let direct: SessiondClient;
let tokenDir: string;
const logs: Array<{ msg: string; fields: Record<string, unknown> }> = [];

before(async () => {
  d = await Daemon.start();
  tokenDir = mkdtempSync(join(tmpdir(), "sdrp-"));
  relay = await startRelay({ port: 0, socketPath: d.socket, tokenFile: join(tokenDir, "token"), maxPhones: 3,
    log: (msg, fields) => void logs.push({ msg, fields }) });
  direct = await SessiondClient.connect({ socketPath: d.socket });
});
after(async () => {
  direct?.close();
  await relay?.close();
  await d?.stop();
  if (tokenDir) rmSync(tokenDir, { recursive: true, force: true });
});

async function newSession(): Promise<string> {
  return (await direct.create({ provider: "echo", cwd: d.dir })).sessionId;
}

const reason = (r: string) => (e: unknown) => e instanceof RpcError && e.data.reason === r;

test("a phone cannot release or cut short another phone's hold without its holdToken", T, async () => {
  const id = await newSession();
  const a = await Phone.connect(relay.url, relay.token, "phone-a");
  const b = await Phone.connect(relay.url, relay.token, "phone-b");
  try {
    const h = await a.call<{ holdToken: string }>("agentSession.hold", { sessionId: id, holderId: "a:1", ttlMs: 600_000 });
    await assert.rejects(b.call("agentSession.release", { sessionId: id, holderId: "a:1" }), reason("invalid_params"));
    const r = await b.call<{ released: boolean }>("agentSession.release", { sessionId: id, holderId: "a:1", holdToken: "not-the-token" });
    assert.equal(r.released, false);
    // Re-holding it with a short ttl would end it early: refused, naming the conflict.
    await assert.rejects(b.call("agentSession.hold", { sessionId: id, holderId: "a:1", ttlMs: 1 }),
      (e: unknown) => e instanceof RpcError && e.data.reason === "holder_conflict" && e.data.holderId === "a:1");
    assert.deepEqual((await direct.get(id)).holders, ["phone:a:1"]);
    // Phone a, reconnected under its name, re-homes its hold; with the
    // holdToken any phone may take it over.
    const a2 = await Phone.connect(relay.url, relay.token, "phone-a");
    await a2.call("agentSession.hold", { sessionId: id, holderId: "a:1", ttlMs: 600_000 });
    await a2.drop();
    const t = await b.call<{ holdToken: string }>("agentSession.hold", { sessionId: id, holderId: "a:1", ttlMs: 600_000, holdToken: h.holdToken });
    const ok = await b.call<{ released: boolean }>("agentSession.release", { sessionId: id, holderId: "a:1", holdToken: t.holdToken });
    assert.equal(ok.released, true);
    assert.deepEqual((await direct.get(id)).holders, []);
  } finally {
    await a.drop();
    await b.drop();
  }
});

test("a phone cannot name another surface's holder: the desktop's hold with no ttl survives a phone's hold of its holderId with ttlMs 1", T, async () => {
  const { sessionId: id } = await direct.create({ provider: "echo", cwd: d.dir });
  await direct.hold({ sessionId: id, holderId: "desktop-chat:1" });
  const p = await Phone.connect(relay.url, relay.token, "mallory");
  try {
    const h = await p.call<{ holdToken: string; holders: string[] }>("agentSession.hold", { sessionId: id, holderId: "desktop-chat:1", ttlMs: 1 });
    assert.deepEqual(h.holders.sort(), ["desktop-chat:1", "phone:desktop-chat:1"]);
    // Its ttl runs out; the desktop's hold stays.
    while ((await direct.get(id)).holders.length > 1) await new Promise((r) => setImmediate(r));
    assert.deepEqual((await direct.get(id)).holders, ["desktop-chat:1"]);
    const r = await p.call<{ released: boolean }>("agentSession.release", { sessionId: id, holderId: "desktop-chat:1", holdToken: h.holdToken });
    assert.equal(r.released, false);
    assert.deepEqual((await direct.get(id)).holders, ["desktop-chat:1"]);
    assert.equal(direct.heldCount >= 1, true);
  } finally {
    await p.drop();
    await direct.release({ sessionId: id, holderId: "desktop-chat:1" });
  }
});

test("two phones reusing the same clientMessageId get a turn each; a retry of one phone's id is a duplicate", T, async () => {
  const id = await newSession();
  await direct.hold({ sessionId: id, holderId: "desk" });
  const a = await Phone.connect(relay.url, relay.token, "phone-a");
  const b = await Phone.connect(relay.url, relay.token, "phone-b");
  try {
    const sub = await direct.attach(id);
    const sa = await a.call<{ turnId: string; duplicate: boolean }>("agentSession.send", { sessionId: id, text: "from a", clientMessageId: "1" });
    // b's send waits for a's turn to end: while it runs, a send is turn_running.
    await untilTurnCompleted(sub, sa.turnId);
    sub.close();
    const sb = await b.call<{ turnId: string; duplicate: boolean }>("agentSession.send", { sessionId: id, text: "from b", clientMessageId: "1" });
    assert.equal(sa.duplicate, false);
    assert.equal(sb.duplicate, false, "phone b's text is not dropped as a's duplicate");
    assert.notEqual(sa.turnId, sb.turnId);
    const again = await a.call<{ turnId: string; duplicate: boolean }>("agentSession.send", { sessionId: id, text: "from a", clientMessageId: "1" });
    assert.deepEqual(again, { turnId: sa.turnId, duplicate: true });
    await assert.rejects(a.call("agentSession.send", { sessionId: id, text: "x", clientMessageId: 7 }), reason("invalid_params"));
  } finally {
    await a.drop();
    await b.drop();
    await direct.release({ sessionId: id, holderId: "desk" });
  }
});

test("phone params that cannot be forwarded are refused alone; the shared hold connection stays", T, async () => {
  const id = await newSession();
  const p = await Phone.connect(relay.url, relay.token, "phone-n");
  const other = await Phone.connect(relay.url, relay.token, "phone-o");
  try {
    await other.call("agentSession.hold", { sessionId: id, holderId: "o:1", ttlMs: 600_000 });
    // 20k deep: small on the wire, over the daemon's nesting (10k).
    const deep = "[".repeat(20_000) + "]".repeat(20_000);
    await assert.rejects(p.raw(`{"jsonrpc":"2.0","id":-1,"method":"agentSession.hold","params":{"sessionId":"${id}","holderId":"n:1","x":${deep}}}`),
      reason("invalid_params"));
    // 1e5 is 3 bytes as sent, 6 once the relay re-serialises it.
    const grow = `{"jsonrpc":"2.0","id":-1,"method":"agentSession.hold","params":{"sessionId":"${id}","holderId":"n:2","x":[${new Array(240_000).fill("1e5").join(",")}]}}`;
    assert.ok(grow.length < 1 << 20);
    await assert.rejects(p.raw(grow), reason("message_too_large"));
    // The shared connection never dropped: no re-hold, the hold is there,
    // and the phones go on.
    assert.deepEqual((await direct.get(id)).holders, ["phone:o:1"]);
    const h = await p.call<{ holdToken: string }>("agentSession.hold", { sessionId: id, holderId: "n:3", ttlMs: 600_000 });
    assert.ok(h.holdToken);
    assert.equal(logs.filter((l) => l.msg === "daemon connection restored").length, 0, "the relay's hold connection never reconnected");
  } finally {
    await p.drop();
    await other.drop();
  }
});

test("phones past maxPhones are refused 503 naming the limit, logged once; a slot frees when a phone goes", T, async () => {
  const phones = [];
  for (let i = 0; i < 3; i++) phones.push(await Phone.connect(relay.url, relay.token));
  try {
    await assert.rejects(Phone.connect(relay.url, relay.token), /HTTP 503 .*maxPhones 3/);
    await assert.rejects(Phone.connect(relay.url, relay.token), /HTTP 503/);
    assert.equal(logs.filter((l) => l.msg === "phone refused: too many phones").length, 1);
    await assert.rejects(Phone.connect(relay.url, relay.token, "bad id!"), /HTTP 400/);
    const gone = phones.pop()!;
    const closed = gone.closed;
    await gone.drop();
    await closed;
    // The relay sees the close on its side a moment later: retry on 503.
    for (;;) {
      try {
        phones.push(await Phone.connect(relay.url, relay.token));
        break;
      } catch (e) {
        if (!/HTTP 503/.test(String(e))) throw e;
        await new Promise((r) => setImmediate(r));
      }
    }
  } finally {
    for (const p of phones) await p.drop();
  }
});

test("a relay started before the daemon exits 1 with one line naming the socket, and prints the token it created", T, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "sdrn-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const main = new URL("../relay/main.js", import.meta.url).pathname;
  const sock = join(dir, "run", "none.sock");
  const child = spawn(process.execPath, [main, "--port", "0", "--socket", sock, "--token-file", join(dir, "tok", "token")],
    { stdio: ["ignore", "pipe", "pipe"] });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  let out = "";
  let err = "";
  child.stdout!.on("data", (b: Buffer) => (out += b.toString()));
  child.stderr!.on("data", (b: Buffer) => (err += b.toString()));
  const code = await new Promise<number | null>((r) => child.on("close", (c) => r(c)));
  assert.equal(code, 1, err);
  const token = readFileSync(join(dir, "tok", "token"), "utf8").trim();
  assert.ok(out.includes(token), `the new token is printed: ${out}`);
  assert.match(err, new RegExp(`no sessiond answers on ${sock.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`));
  assert.doesNotMatch(err, /\n\s+at /, "no stack trace");
  assert.equal(err.trim().split("\n").length, 1, err);
});
