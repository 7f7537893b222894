import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { statSync, mkdtempSync, rmSync, writeFileSync, chmodSync, readFileSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { connect } from "node:net";
import { join } from "node:path";
import { Daemon } from "./daemon.js";
import { Phone, RpcError } from "./phone.js";
import { deltaText, gapless } from "./helpers.js";
import { SessiondClient, type Event } from "../src/index.js";
import { startRelay, type Relay } from "../relay/relay.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };
let d: Daemon;
let relay: Relay;
let direct: SessiondClient;
let tokenFile: string;
let tokenDir: string;

before(async () => {
  // A short release clock: a dropped hold shows as the session's eviction.
  d = await Daemon.start('idle_timeout = "100ms"\n');
  tokenDir = mkdtempSync(join(tmpdir(), "sdrt-"));
  tokenFile = join(tokenDir, "sub", "token");
  // Its tests present over 20 wrong tokens from 127.0.0.1 (the reset
  // test): the per-source lockout is tested in relay-auth.test.
  relay = await startRelay({ port: 0, socketPath: d.socket, tokenFile, holdTtlMs: 60_000, authMaxFailures: 1000 });
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

test("the token store is created 0600 on first start and reused", T, async () => {
  assert.equal(relay.tokenCreated, true);
  assert.equal(statSync(tokenFile).mode & 0o777, 0o600);
  const again = await startRelay({ port: 0, socketPath: d.socket, tokenFile });
  try {
    assert.equal(again.tokenCreated, false);
    assert.equal(again.token, relay.token);
    assert.match(again.url, /^ws:\/\/127\.0\.0\.1:/);
  } finally {
    await again.close();
  }
});

test("a wrong or missing token is refused", T, async () => {
  await assert.rejects(Phone.connect(relay.url, relay.token + "x"), /HTTP 401/);
  await assert.rejects(Phone.connect(relay.url, undefined), /HTTP 401/);
  const ok = await Phone.connect(relay.url, relay.token);
  await ok.drop();
});

test("a peer that resets the connection after a refused upgrade does not crash the relay", T, async () => {
  for (let i = 0; i < 20; i++) {
    await new Promise<void>((res) => {
      const s = connect(relay.port, "127.0.0.1", () => {
        s.write("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
          "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer wrong\r\n\r\n");
        s.resetAndDestroy();
        res();
      });
      s.on("error", () => res());
    });
  }
  const ok = await Phone.connect(relay.url, relay.token);
  await ok.drop();
});

test("admin methods, unknown methods and bad frames get errors; the phone stays connected", T, async () => {
  const p = await Phone.connect(relay.url, relay.token);
  try {
    for (const m of ["daemon.shutdown", "daemon.stats", "daemon.status", "initialize"]) {
      await assert.rejects(p.call(m), (e: unknown) => e instanceof RpcError && e.code === -32601 &&
        e.data.reason === "method_not_relayed", `${m} is refused by the relay itself`);
    }
    for (const m of ["no.such", "toString", "constructor", "__proto__", "hasOwnProperty"]) {
      await assert.rejects(p.call(m), (e: unknown) => e instanceof RpcError && e.data.reason === "method_not_found", m);
    }
    await assert.rejects(p.raw("not json"), (e: unknown) => e instanceof RpcError && e.data.reason === "parse_error");
    await assert.rejects(p.raw('{"hello":1}'), (e: unknown) => e instanceof RpcError && e.data.reason === "invalid_request");
    await assert.rejects(p.raw("x".repeat((1 << 20) + 1)), (e: unknown) => e instanceof RpcError && e.data.reason === "message_too_large");
    const l = await p.call<{ sessions: unknown[] }>("agentSession.list");
    assert.ok(Array.isArray(l.sessions));
    assert.equal((await direct.status()).protocolVersion, 1, "the daemon is still up");
  } finally {
    await p.drop();
  }
});

test("a phone that drops mid-turn resumes from its cursor; its hold outlives it; a retried send is not duplicated", T, async () => {
  const id = await newSession();
  // The phone names itself: its holds and clientMessageIds are its own
  // across its connections.
  const p1 = await Phone.connect(relay.url, relay.token, "phone-1");
  const h = await p1.call<{ holdToken: string }>("agentSession.hold", { sessionId: id, holderId: "phone:1" });
  assert.ok(h.holdToken);
  await p1.call("agentSession.attach", { sessionId: id });
  const s1 = await p1.call<{ turnId: string; duplicate: boolean }>("agentSession.send",
    { sessionId: id, text: "/sleep 300 first", clientMessageId: "m-1" });
  assert.equal(s1.duplicate, false);
  const got = await p1.until((e) => e.type === "turn.started");
  const cursor = got.at(-1)!.seq;
  await p1.drop();

  const info = await direct.get(id);
  assert.deepEqual(info.holders, ["phone:phone:1"], "the hold outlives the phone's connection");

  const p2 = await Phone.connect(relay.url, relay.token, "phone-1");
  try {
    await p2.call("agentSession.hold", { sessionId: id, holderId: "phone:1" });
    await p2.call("agentSession.attach", { sessionId: id, afterSeq: cursor });
    const retry = await p2.call<{ turnId: string; duplicate: boolean }>("agentSession.send",
      { sessionId: id, text: "/sleep 300 first", clientMessageId: "m-1" });
    assert.deepEqual(retry, { turnId: s1.turnId, duplicate: true });
    const rest = await p2.until((e) => e.type === "turn.completed" && e.turnId === s1.turnId);
    const all: Event[] = [...got.filter((e) => e.seq <= cursor), ...rest];
    assert.equal(gapless(all), undefined);
    assert.equal(all[0]!.seq, 1);
    assert.equal(rest[0]!.seq, cursor + 1, "resumed right after the cursor");
    assert.equal(deltaText(all, s1.turnId), "echo: /sleep 300 first");
    assert.equal(all.filter((e) => e.type === "turn.started").length, 1, "one turn");
  } finally {
    await p2.drop();
  }
});

test("a phone's hold is dropped once its ttl runs out", T, async () => {
  const id = await newSession();
  const p = await Phone.connect(relay.url, relay.token);
  await p.call("agentSession.hold", { sessionId: id, holderId: "phone:ttl", ttlMs: 1500 });
  const sub = await direct.attach(id);
  await p.drop();
  assert.deepEqual((await direct.get(id)).holders, ["phone:phone:ttl"], "kept within the ttl");
  // The ttl ends the hold; the release clock then evicts the session.
  for await (const e of sub) {
    if (e.type === "session.ended") {
      assert.equal((e.data as { reason: string }).reason, "evicted");
      break;
    }
  }
  assert.deepEqual((await direct.get(id)).holders, []);
});

test("a phone whose first call found the daemon down is served once the daemon is back", T, async () => {
  const p = await Phone.connect(relay.url, relay.token);
  try {
    await d.kill("SIGTERM");
    // Answered at once, typed: no wire code of its own (PROTOCOL.md has
    // none), -32603 with data.cause, the socket and how to start it.
    await assert.rejects(p.call("agentSession.list"), (e: unknown) => e instanceof RpcError && e.code === -32603 &&
      e.data.cause === "daemon_unavailable" && e.data.retryable === true && e.data.socketPath === d.socket &&
      e.message.includes(d.socket) && /sessiond serve/.test(e.message));
    await d.start();
    const l = await p.call<{ sessions: unknown[] }>("agentSession.list");
    assert.ok(Array.isArray(l.sessions), "the same phone is served after the restart");
  } finally {
    await p.drop();
  }
});

test("after a daemon restart a phone's release with the holdToken it got releases the re-homed hold", T, async () => {
  const id = await newSession();
  const p = await Phone.connect(relay.url, relay.token);
  try {
    const h = await p.call<{ holdToken: string }>("agentSession.hold", { sessionId: id, holderId: "phone:A" });
    const back = new Promise((res) => direct.once("reconnected", res));
    await d.kill("SIGKILL");
    await d.start();
    await back;
    // The relay re-holds it on its own connection, under a new holdToken.
    while (!(await direct.get(id)).holders.includes("phone:phone:A")) await new Promise((r) => setTimeout(r, 20));
    const r = await p.call<{ released: boolean; holders: string[] }>("agentSession.release",
      { sessionId: id, holderId: "phone:A", holdToken: h.holdToken });
    assert.equal(r.released, true, "the phone's token releases the re-homed hold");
    assert.deepEqual((await direct.get(id)).holders, []);
    // A token older than the one the phone got last changes nothing.
    const h2 = await p.call<{ holdToken: string }>("agentSession.hold", { sessionId: id, holderId: "phone:A" });
    const h3 = await p.call<{ holdToken: string }>("agentSession.hold", { sessionId: id, holderId: "phone:A" });
    const stale = await p.call<{ released: boolean }>("agentSession.release", { sessionId: id, holderId: "phone:A", holdToken: h2.holdToken });
    assert.equal(stale.released, false);
    assert.deepEqual((await direct.get(id)).holders, ["phone:phone:A"]);
    await p.call("agentSession.release", { sessionId: id, holderId: "phone:A", holdToken: h3.holdToken });
  } finally {
    await p.drop();
  }
});

test("a token file that is a symlink, open to others or too short is refused", T, async () => {
  const dir = mkdtempSync(join(tmpdir(), "sdtk-"));
  try {
    const open = join(dir, "open");
    writeFileSync(open, "x".repeat(43) + "\n", { mode: 0o644 });
    chmodSync(open, 0o644);
    await assert.rejects(startRelay({ port: 0, socketPath: d.socket, tokenFile: open }), /has mode 0644, open to group or others/);
    const short = join(dir, "short");
    writeFileSync(short, "abc\n", { mode: 0o600 });
    await assert.rejects(startRelay({ port: 0, socketPath: d.socket, tokenFile: short }), /is 3 characters, under the minimum of 32/);
    assert.equal(readFileSync(short, "utf8"), "abc\n", "never replaced");
    symlinkSync(tokenFile, join(dir, "link"));
    await assert.rejects(startRelay({ port: 0, socketPath: d.socket, tokenFile: join(dir, "link") }), /is a symlink/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a relayed stream whose session is gone after a daemon restart ends alone: the phone is told which and why, and stays connected", T, async () => {
  const gone = await newSession();
  const kept = await newSession();
  const p = await Phone.connect(relay.url, relay.token);
  try {
    await p.call("agentSession.hold", { sessionId: kept, holderId: "phone:k" });
    const a = await p.call<{ subscriptionId: string }>("agentSession.attach", { sessionId: gone });
    await p.call("agentSession.attach", { sessionId: kept });
    await d.kill("SIGKILL");
    // The daemon comes back where the relay does not look, the session is
    // deleted there, and then it returns to the relay's socket.
    const side = join(d.dir, "side.sock");
    await d.start(side);
    const other = await SessiondClient.connect({ socketPath: side, reconnect: false });
    await other.delete(gone);
    other.close();
    await d.kill("SIGTERM");
    await d.start();
    const lost: Record<string, unknown> = await Promise.race([p.notice("relay.streamLost"), p.closed.then((c) => ({ closed: c }))]);
    assert.equal(lost.sessionId, gone, `the stream's end is told, the phone not closed: ${JSON.stringify(lost)}`);
    assert.equal(lost.subscriptionId, a.subscriptionId);
    assert.equal(lost.reason, "session_not_found");
    assert.match(String(lost.message), new RegExp(gone));
    // The phone's other stream and calls carry on (its hold re-taken, as
    // a phone does after a restart: the relay's hold connection reconnects
    // on its own schedule).
    await p.call("agentSession.hold", { sessionId: kept, holderId: "phone:k" });
    const s = await p.call<{ turnId: string }>("agentSession.send", { sessionId: kept, text: "still here" });
    const evs = await p.until((e) => e.type === "turn.completed" && e.turnId === s.turnId);
    assert.equal(deltaText(evs, s.turnId), "echo: still here");
    assert.equal(p.ws.readyState, p.ws.OPEN);
  } finally {
    await p.drop();
  }
});
