// The relay against hostile or vanished phones: ids that are not ids, a
// frame whose handling throws, phones that stop answering pings, phones
// that never read, and SIGTERM.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { WebSocket } from "ws";
import { Daemon } from "./daemon.js";
import { Phone, RpcError } from "./phone.js";
import { untilTurnCompleted } from "./helpers.js";
import { SessiondClient } from "../src/index.js";
import { startRelay, type Relay } from "../relay/relay.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };
const mainJs = join(dirname(fileURLToPath(import.meta.url)), "..", "relay", "main.js");
let d: Daemon;
let dir: string;
let direct: SessiondClient;

before(async () => {
  d = await Daemon.start();
  dir = mkdtempSync(join(tmpdir(), "sdrh-"));
  direct = await SessiondClient.connect({ socketPath: d.socket });
});
after(async () => {
  direct?.close();
  await d?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

type Log = { msg: string; fields: Record<string, unknown> };
function logSink(): { logs: Log[]; log: (msg: string, fields: Record<string, unknown>) => void; until(msg: string, n?: number): Promise<void> } {
  const logs: Log[] = [];
  let waiters: Array<() => void> = [];
  return {
    logs,
    log: (msg, fields) => {
      logs.push({ msg, fields });
      for (const w of waiters.splice(0)) w();
    },
    async until(msg, n = 1) {
      while (logs.filter((l) => l.msg === msg).length < n) await new Promise<void>((r) => waiters.push(r));
    },
  };
}

async function relayWith(o: Record<string, unknown>, sink = logSink()): Promise<{ relay: Relay; sink: ReturnType<typeof logSink> }> {
  const relay = await startRelay({ port: 0, socketPath: d.socket, tokenFile: join(dir, "token"), log: sink.log, ...o });
  return { relay, sink };
}

const invalidId = (e: unknown) => e instanceof RpcError && e.code === -32600 && e.data.reason === "invalid_request" && e.data.field === "id";

test("an id that is not a string, a number or null is refused -32600 naming it; a 5000-deep array id kills nothing", T, async () => {
  const { relay } = await relayWith({});
  const p = await Phone.connect(relay.url, relay.token);
  const other = await Phone.connect(relay.url, relay.token);
  try {
    const deep = "[".repeat(5000) + "]".repeat(5000); // ~10 KB
    await assert.rejects(p.raw(`{"jsonrpc":"2.0","id":${deep},"method":"agentSession.list","params":{}}`), (e: unknown) =>
      invalidId(e) && /id must be a string, a number or null, not an array/.test((e as Error).message));
    // Not JSON-RPC either: the id is still never echoed.
    await assert.rejects(p.raw(`{"id":${deep}}`), invalidId);
    await assert.rejects(p.raw(`{"jsonrpc":"2.0","id":{"a":1},"method":"agentSession.list"}`), (e: unknown) =>
      invalidId(e) && /not object/.test((e as Error).message));
    await assert.rejects(p.raw(`{"jsonrpc":"2.0","id":true,"method":"agentSession.list"}`), (e: unknown) =>
      invalidId(e) && /not boolean/.test((e as Error).message));
    await assert.rejects(p.raw(JSON.stringify({ jsonrpc: "2.0", id: "x".repeat(1025), method: "agentSession.list" })), (e: unknown) =>
      invalidId(e) && e instanceof RpcError && e.data.limit === 1024);
    // String and number ids are answered under their id.
    p.ws.send(JSON.stringify({ jsonrpc: "2.0", id: "s-1", method: "agentSession.list", params: {} }));
    const answer = await new Promise<Record<string, unknown>>((res) => p.ws.on("message", (b) => {
      const m = JSON.parse(b.toString()) as Record<string, unknown>;
      if (m.id === "s-1") res(m);
    }));
    assert.ok(answer.result, JSON.stringify(answer));
    assert.ok(Array.isArray((await p.call<{ sessions: unknown[] }>("agentSession.list")).sessions), "the phone stays");
    assert.ok(Array.isArray((await other.call<{ sessions: unknown[] }>("agentSession.list")).sessions), "other phones stay");
  } finally {
    await p.drop();
    await other.drop();
    await relay.close();
  }
});

test("numeric ids that are not safe integers are refused -32600 before the call runs; afterSeq must be a safe non-negative integer", T, async () => {
  const { relay } = await relayWith({});
  const p = await Phone.connect(relay.url, relay.token);
  try {
    const before = (await direct.list()).sessions.length;
    for (const id of ["1e400", "123456789012345678901234567890", "1.5", "-1e300"]) {
      await assert.rejects(p.raw(`{"jsonrpc":"2.0","id":${id},"method":"agentSession.create","params":{"provider":"echo","cwd":${JSON.stringify(d.dir)}}}`),
        (e: unknown) => invalidId(e) && /integer/.test((e as Error).message), id);
    }
    assert.equal((await direct.list()).sessions.length, before, "no call ran");
    const { sessionId } = await direct.create({ provider: "echo", cwd: d.dir });
    for (const afterSeq of [1e400, -1, 1.5, "3", 2 ** 60]) {
      const frame = `{"jsonrpc":"2.0","id":7,"method":"agentSession.attach","params":{"sessionId":"${sessionId}","afterSeq":${typeof afterSeq === "string" ? JSON.stringify(afterSeq) : afterSeq === 1e400 ? "1e400" : String(afterSeq)}}}`;
      p.ws.send(frame);
      const err = await new Promise<Record<string, unknown>>((res) => p.ws.once("message", (b) => res(JSON.parse(b.toString()) as Record<string, unknown>)));
      const e = err.error as { code: number; data: { field: string } } | undefined;
      assert.equal(e?.code, -32602, `${String(afterSeq)}: ${JSON.stringify(err)}`);
      assert.equal(e?.data.field, "afterSeq");
    }
    assert.equal((await p.call<{ lastSeq: number }>("agentSession.attach", { sessionId, afterSeq: 0 })).lastSeq >= 1, true);
  } finally {
    await p.drop();
    await relay.close();
  }
});

test("processes creating the token file at once all get the one token, none an error", T, async () => {
  const tokenJs = join(dirname(fileURLToPath(import.meta.url)), "..", "relay", "token.js");
  const script = `import { loadOrCreateToken } from ${JSON.stringify(tokenJs)};
const go = () => { try { const r = loadOrCreateToken(process.argv[1]); console.log(JSON.stringify(r)); } catch (e) { console.log(JSON.stringify({ error: e.message })); } };
process.stdin.once("data", go);`;
  for (let round = 0; round < 8; round++) {
    const file = join(mkdtempSync(join(dir, "tok-")), "relay", "token");
    const procs = Array.from({ length: 10 }, () => 0).map(() => spawn(process.execPath, ["--input-type=module", "-e", script, file], { stdio: ["pipe", "pipe", "inherit"] }));
    const outs = procs.map((p) => new Promise<string>((res) => {
      let o = "";
      p.stdout!.setEncoding("utf8").on("data", (s: string) => (o += s));
      p.on("exit", () => res(o));
    }));
    // Every process is up and waiting; then all go at once.
    await Promise.all(procs.map((p) => new Promise((r) => p.once("spawn", r))));
    for (const p of procs) p.stdin!.end("go\n");
    const results = (await Promise.all(outs)).map((o) => JSON.parse(o) as { token?: string; created?: boolean; error?: string });
    for (const r of results) assert.equal(r.error, undefined, JSON.stringify(results));
    assert.equal(new Set(results.map((r) => r.token)).size, 1, JSON.stringify(results));
    assert.equal(results.filter((r) => r.created).length, 1, JSON.stringify(results));
    assert.equal(readFileSync(file, "utf8").trim(), results[0]!.token);
  }
});

test("an exception in a frame's handling is logged and answered -32603; the relay and the phone stay", T, async () => {
  const sink = logSink();
  const { relay } = await relayWith({}, {
    ...sink,
    log: (msg, fields) => {
      if (msg === "phone notification dropped") throw new Error("the log's disk is full");
      sink.log(msg, fields);
    },
  });
  const p = await Phone.connect(relay.url, relay.token);
  try {
    await assert.rejects(p.raw(JSON.stringify({ jsonrpc: "2.0", method: "agentSession.list", params: {} })), (e: unknown) =>
      e instanceof RpcError && e.code === -32603 && e.data.reason === "internal_error");
    await sink.until("phone frame failed");
    assert.match(String(sink.logs.find((l) => l.msg === "phone frame failed")!.fields.error), /disk is full/);
    assert.ok(Array.isArray((await p.call<{ sessions: unknown[] }>("agentSession.list")).sessions), "the phone stays");
  } finally {
    await p.drop();
    await relay.close();
  }
});

test("heartbeat: phones that stop answering pings are terminated, freeing their slots and daemon connections; a live phone stays", T, async () => {
  const { relay, sink } = await relayWith({ maxPhones: 3, pingIntervalMs: 50, pingTimeoutMs: 200 });
  const live = await Phone.connect(relay.url, relay.token);
  try {
    await live.call("agentSession.list");
    const base = (await direct.status()).connections;
    // Two phones that go silent (no pong: gone from the network, no FIN).
    const silent = await Promise.all([0, 1].map(() => new Promise<WebSocket>((res, rej) => {
      const ws = new WebSocket(relay.url, { headers: { authorization: `Bearer ${relay.token}` }, autoPong: false });
      ws.once("open", () => res(ws));
      ws.once("error", rej);
    })));
    for (const ws of silent) {
      ws.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "agentSession.list", params: {} }));
      await new Promise((r) => ws.once("message", r)); // its daemon connection is up
    }
    assert.equal((await direct.status()).connections, base + 2);
    await assert.rejects(Phone.connect(relay.url, relay.token), /HTTP 503/, "every slot is taken");
    await sink.until("phone closed: no pong", 2);
    await Promise.all(silent.map((ws) => new Promise((r) => (ws.readyState === ws.CLOSED ? r(0) : ws.once("close", r)))));
    // Their slots are free, and their daemon connections closed.
    const back = await Phone.connect(relay.url, relay.token);
    await back.drop();
    while ((await direct.status()).connections !== base) await new Promise((r) => setImmediate(r));
    assert.equal(sink.logs.filter((l) => l.msg === "phone closed: no pong").length, 2, "logged once per phone");
    assert.ok(Array.isArray((await live.call<{ sessions: unknown[] }>("agentSession.list")).sessions), "the live phone stays");
  } finally {
    await live.drop();
    await relay.close();
  }
});

test("heartbeat: only a pong carrying the nonce of the relay's ping counts; a phone sending unsolicited or wrong pongs is terminated", T, async () => {
  const { relay, sink } = await relayWith({ pingIntervalMs: 50, pingTimeoutMs: 200 });
  const live = await Phone.connect(relay.url, relay.token); // ws answers pings with their payload
  try {
    const ws = new WebSocket(relay.url, { headers: { authorization: `Bearer ${relay.token}` }, autoPong: false });
    await new Promise((res, rej) => {
      ws.once("open", res);
      ws.once("error", rej);
    });
    const pings: Buffer[] = [];
    ws.pong("unsolicited");
    ws.on("ping", (data: Buffer) => {
      pings.push(data);
      // Never the relay's nonce: unsolicited pongs and a wrong payload.
      ws.pong();
      ws.pong("x");
      ws.pong(Buffer.from(data).reverse());
    });
    await sink.until("phone closed: no pong");
    await new Promise((r) => (ws.readyState === ws.CLOSED ? r(0) : ws.once("close", r)));
    assert.equal(pings[0]!.length, 16, "the relay's ping carries a 16-byte nonce");
    assert.ok(Array.isArray((await live.call<{ sessions: unknown[] }>("agentSession.list")).sessions), "a phone that answers stays");
    assert.equal(sink.logs.filter((l) => l.msg === "phone closed: no pong").length, 1);
  } finally {
    await live.drop();
    await relay.close();
  }
});

test("past maxStreamsPerPhone an attach is refused -32019 phone_streams", T, async () => {
  const { relay } = await relayWith({ maxStreamsPerPhone: 2 });
  const p = await Phone.connect(relay.url, relay.token);
  try {
    const { sessionId } = await direct.create({ provider: "echo", cwd: d.dir });
    await p.call("agentSession.attach", { sessionId });
    const { subscriptionId } = await p.call<{ subscriptionId: string }>("agentSession.attach", { sessionId });
    await assert.rejects(p.call("agentSession.attach", { sessionId }), (e: unknown) =>
      e instanceof RpcError && e.code === -32019 && e.data.limit === "phone_streams" && e.data.max === 2 && /maxStreamsPerPhone 2/.test(e.message));
    await p.call("agentSession.detach", { subscriptionId });
    await p.call("agentSession.attach", { sessionId });
  } finally {
    await p.drop();
    await relay.close();
  }
});

/** The relay's resident set (bytes), from /proc. */
function rss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m![1]) * 1024;
}

/** sessiond-relay as a process of its own; its log lines on stderr. */
async function relayProcess(args: string[]): Promise<{ pid: number; url: string; token: string; lines: Log[]; until(msg: string, n?: number): Promise<void>; exited: Promise<{ code: number | null; ms: number; out: string }>; kill(sig: NodeJS.Signals): number }> {
  const tokenFile = join(mkdtempSync(join(dir, "rp-")), "token");
  const p = spawn(process.execPath, [mainJs, "--port", "0", "--socket", d.socket, "--token-file", tokenFile, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  const lines: Log[] = [];
  let waiters: Array<() => void> = [];
  let out = "";
  let err = "";
  p.stderr!.setEncoding("utf8").on("data", (s: string) => {
    err += s;
    const parts = err.split("\n");
    err = parts.pop()!;
    for (const l of parts) {
      try {
        const j = JSON.parse(l) as Record<string, unknown>;
        lines.push({ msg: String(j.msg), fields: j });
      } catch {
        out += l + "\n";
      }
    }
    for (const w of waiters.splice(0)) w();
  });
  let signalled = 0;
  const exited = new Promise<{ code: number | null; ms: number; out: string }>((res) => p.on("exit", (code) => res({ code, ms: Date.now() - signalled, out: out + err })));
  const url = await new Promise<string>((res, rej) => {
    p.stdout!.setEncoding("utf8").on("data", (s: string) => {
      out += s;
      const m = /listening on (\S+)/.exec(out);
      if (m) res(m[1]!);
    });
    p.on("exit", (code) => rej(new Error(`relay exited ${code}: ${out}${err}`)));
  });
  return {
    pid: p.pid!, url, token: readFileSync(tokenFile, "utf8").trim(), lines, exited,
    async until(msg, n = 1) {
      while (lines.filter((l) => l.msg === msg).length < n) await new Promise<void>((r) => waiters.push(r));
    },
    kill(sig) {
      signalled = Date.now();
      p.kill(sig);
      return signalled;
    },
  };
}

// The documented bound (README "The relay's limits"): a phone that never
// reads costs the relay at most maxBufferedBytes, plus its replies on their
// way (REPLY_BUDGET, 4 MiB) and its requests in flight (2 x (maxMessageBytes
// + FRAME_MARGIN)), plus per stream it has attached maxBufferedBytes/16 and
// one page (1 MiB), plus 6 MiB.
function phoneBound(maxBuffered: number, streams: number): number {
  return maxBuffered + (4 << 20) + 2 * ((1 << 20) + (64 << 10)) + streams * (maxBuffered / 16 + (1 << 20)) + (6 << 20);
}
test("phones that never read cost the relay at most the documented bound each (RSS measured); SIGTERM then ends it", T, async () => {
  const maxBuffered = 4 << 20;
  const phones = 6;
  const { sessionId } = await direct.create({ provider: "echo", cwd: d.dir });
  await direct.hold({ sessionId, holderId: "desk" });
  const sub = await direct.attach(sessionId);
  const { turnId } = await direct.send({ sessionId, text: "/flood 1500 10000" }); // ~15 MB of journal
  await untilTurnCompleted(sub, turnId);
  sub.close();
  const r = await relayProcess(["--max-buffered-bytes", String(maxBuffered)]);
  try {
    // One phone through first: what every relay costs anyway is paid.
    const warm = await Phone.connect(r.url, r.token);
    await warm.call("agentSession.attach", { sessionId, afterSeq: 0 });
    await warm.until((e) => e.type === "turn.completed");
    await warm.drop();
    const before = rss(r.pid);
    const ps: Phone[] = [];
    for (let i = 0; i < phones; i++) {
      const p = await Phone.connect(r.url, r.token);
      p.reading(false);
      ps.push(p);
    }
    // Each attach is answered before the events that back up.
    for (const p of ps) p.ws.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "agentSession.attach", params: { sessionId, afterSeq: 0 } }));
    await r.until("phone output backed up", phones);
    // Each stream's page walk then stops at its own bound within a page or
    // two: the peak is sampled across round trips of a live phone.
    const live = await Phone.connect(r.url, r.token);
    let peak = rss(r.pid);
    for (let i = 0; i < 50; i++) {
      await live.call("agentSession.get", { sessionId });
      peak = Math.max(peak, rss(r.pid));
    }
    await live.drop();
    const per = (peak - before) / phones;
    const bound = phoneBound(maxBuffered, 1);
    console.log(`relay RSS per never-reading phone: ${(per / 2 ** 20).toFixed(1)} MiB (bound ${(bound / 2 ** 20).toFixed(1)} MiB, maxBufferedBytes ${maxBuffered >> 20} MiB)`);
    assert.ok(per <= bound, `${per} bytes per phone, over ${bound}`);
    assert.equal(r.lines.filter((l) => l.msg === "phone closed: not reading").length, 0, "the pump waits: no phone passed maxBufferedBytes");
    // SIGTERM with every phone still connected and backed up.
    r.kill("SIGTERM");
    const { code, ms, out } = await r.exited;
    console.log(`relay exited ${ms} ms after SIGTERM`);
    assert.equal(code, 0, out);
    assert.match(out, /SIGTERM: stopped/);
    for (const p of ps) {
      p.reading(true);
      await p.closed;
    }
  } finally {
    r.kill("SIGKILL");
  }
});

/** A raw phone that never reads and writes masked 125-byte pings, 2000 a
 * batch, while its own output is under 8 MB, until stop() says so or cap
 * pings went out. Resolves with how many it wrote. */
async function pingFlood(url: string, token: string, stop: () => boolean, cap: number): Promise<{ ws: WebSocket; sent: number }> {
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` }, autoPong: false });
  await new Promise((res, rej) => {
    ws.once("open", res);
    ws.once("error", rej);
  });
  ws.on("error", () => undefined);
  const sock = (ws as unknown as { _socket: import("node:net").Socket })._socket;
  sock.pause();
  const payload = Buffer.alloc(125, 0x61);
  let sent = 0;
  while (!stop() && sent < cap && ws.readyState === ws.OPEN) {
    for (let i = 0; i < 2000; i++) ws.ping(payload);
    sent += 2000;
    if (ws.bufferedAmount >= 8e6) await new Promise((r) => { sock.once("drain", r); sock.once("close", r); });
    else await new Promise((r) => setImmediate(r));
  }
  return { ws, sent };
}

test("a phone that floods pings and never reads is closed 1008 (its pongs count against maxBufferedBytes); the relay stays bounded, answers new phones, and SIGTERM ends it", T, async () => {
  const r = await relayProcess([]);
  try {
    const warm = await Phone.connect(r.url, r.token);
    await warm.call("agentSession.list");
    await warm.drop();
    const before = rss(r.pid);
    let peak = before;
    let flooded = false;
    const floodLog = r.until("phone closed: ping flood").then(() => (flooded = true));
    const { ws, sent } = await pingFlood(r.url, r.token, () => {
      peak = Math.max(peak, rss(r.pid));
      return flooded;
    }, 400_000);
    await floodLog; // the relay reads the rest of what was sent
    peak = Math.max(peak, rss(r.pid));
    const line = r.lines.find((l) => l.msg === "phone closed: ping flood")!;
    assert.ok(Number(line.fields.pings) > 1024, JSON.stringify(line.fields));
    const bound = (16 << 20) + (6 << 20);
    console.log(`relay RSS growth under a ping flood: ${((peak - before) / 2 ** 20).toFixed(1)} MiB (${sent} pings sent; bound ${bound >> 20} MiB)`);
    assert.ok(peak - before <= bound, `${peak - before} bytes over ${bound}`);
    ws.terminate();
    // Not wedged: a new phone is answered.
    const next = await Phone.connect(r.url, r.token);
    assert.ok(Array.isArray((await next.call<{ sessions: unknown[] }>("agentSession.list")).sessions));
    // SIGTERM while another phone floods.
    let batches = 0;
    const second = pingFlood(r.url, r.token, () => {
      if (++batches === 3) r.kill("SIGTERM");
      return false;
    }, 40_000);
    const { code, ms, out } = await r.exited;
    console.log(`relay exited ${ms} ms after SIGTERM under a ping flood`);
    assert.equal(code, 0, out);
    assert.match(out, /SIGTERM: stopped/);
    (await second).ws.terminate();
    await next.closed;
  } finally {
    r.kill("SIGKILL");
  }
});

test("phones with no stream that send 64 reads of ~1 MiB pages each and never read cost at most the documented bound each: replies in flight count (RSS measured)", T, async () => {
  const phones = 4;
  const { sessionId } = await direct.create({ provider: "echo", cwd: d.dir });
  await direct.hold({ sessionId, holderId: "desk" });
  const sub = await direct.attach(sessionId);
  const { turnId } = await direct.send({ sessionId, text: "/flood 1500 10000" }); // ~15 MB of journal
  await untilTurnCompleted(sub, turnId);
  sub.close();
  const r = await relayProcess([]);
  try {
    // A reading phone walks the journal twice first: what every relay
    // costs anyway (its heap grown to carry pages) is paid.
    const warm = await Phone.connect(r.url, r.token);
    for (let round = 0; round < 2; round++) {
      for (let after = 0, more = true; more;) {
        const page = await warm.call<{ events: Array<{ seq: number }>; hasMore: boolean }>("agentSession.read", { sessionId, afterSeq: after, limit: 4096 });
        more = page.hasMore && page.events.length > 0;
        if (page.events.length > 0) after = page.events[page.events.length - 1]!.seq;
      }
    }
    await warm.drop();
    const live = await Phone.connect(r.url, r.token);
    await live.call("agentSession.get", { sessionId });
    const before = rss(r.pid);
    const ps: Phone[] = [];
    for (let i = 0; i < phones; i++) {
      const p = await Phone.connect(r.url, r.token);
      p.reading(false);
      ps.push(p);
    }
    for (const p of ps) {
      for (let i = 0; i < 64; i++) p.ws.send(JSON.stringify({ jsonrpc: "2.0", id: i + 1, method: "agentSession.read", params: { sessionId, afterSeq: 0, limit: 4096 } }));
    }
    // Their replies back up to half of maxBufferedBytes, then their calls
    // wait (logged once per phone): the peak is sampled across a live
    // phone's round trips until then and 50 more.
    let backed = false;
    const backing = Promise.race([r.until("phone output backed up", phones), r.until("phone closed: not reading")]).then(() => (backed = true));
    let peak = rss(r.pid);
    for (let after = 50; after > 0; after -= backed ? 1 : 0) {
      await live.call("agentSession.get", { sessionId });
      peak = Math.max(peak, rss(r.pid));
    }
    await backing;
    const per = (peak - before) / phones;
    const bound = phoneBound(16 << 20, 0);
    console.log(`relay RSS per never-reading phone with 64 reads sent: ${(per / 2 ** 20).toFixed(1)} MiB (bound ${(bound / 2 ** 20).toFixed(1)} MiB)`);
    assert.ok(per <= bound, `${per} bytes per phone, over ${bound}`);
    assert.equal(r.lines.filter((l) => l.msg === "phone closed: not reading").length, 0, "their calls wait: none passed maxBufferedBytes");
    await live.drop();
    for (const p of ps) await p.drop();
  } finally {
    r.kill("SIGKILL");
    await direct.release({ sessionId, holderId: "desk" });
  }
});
