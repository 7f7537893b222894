// npm run bench: the two figures of the client's contract, against a real
// daemon (built like the tests' one; $SESSIOND_BIN to reuse a binary).
//  1. attach replay of 100k journal events through the client, against a
//     bare Node socket reader parsing the same stream in the same run
//     (want >= 0.5x the bare reader's rate);
//  2. hold + send + first delta through the relay, against the same
//     through the client directly (want <= 2x).
import { createConnection } from "node:net";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { Daemon, repoRoot } from "../test/daemon.js";
import { Phone } from "../test/phone.js";
import { SessiondClient } from "../src/index.js";
import { startRelay } from "../relay/relay.js";

const EVENTS = Number(process.env.BENCH_EVENTS ?? 100_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** A bare reader: newline-framed JSON-RPC, JSON.parse per line, pages of 4096. */
function bareReplay(socket: string, id: string, last: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createConnection(socket);
    const t0 = performance.now();
    let buf = "";
    let n = 0;
    const send = (m: object) => s.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n");
    s.on("error", reject);
    s.on("connect", () => send({ id: 1, method: "initialize", params: { protocolVersion: 1, client: { name: "bare", version: "0" },
      capabilities: ["agent-session.attach.v1", "agent-session.structured.hold.v1", "agent-session.items.v1"] } }));
    s.setEncoding("utf8");
    s.on("data", (chunk: string) => {
      buf += chunk;
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        const m = JSON.parse(line) as { id?: number; result?: { events?: Array<{ seq: number }> } };
        if (m.id === 1) return void send({ id: 2, method: "agentSession.attach", params: { sessionId: id, limit: 4096 } });
        const evs = m.result?.events ?? [];
        n += evs.length;
        const seq = evs.at(-1)?.seq ?? 0;
        if (seq >= last) {
          s.destroy();
          return resolve(performance.now() - t0);
        }
        send({ id: 3, method: "agentSession.read", params: { sessionId: id, afterSeq: seq, limit: 4096 } });
      }
    });
  });
}

async function clientReplay(socket: string, id: string, last: number): Promise<number> {
  const t0 = performance.now();
  const c = await SessiondClient.connect({ socketPath: socket });
  const sub = await c.attach(id);
  for await (const e of sub) if (e.seq >= last) break;
  c.close();
  return performance.now() - t0;
}

async function replayFigure(): Promise<void> {
  const d = new Daemon();
  const pfDir = mkdtempSync(join(tmpdir(), "sdpf-"));
  const prefill = join(pfDir, "prefill");
  execFileSync("go", ["build", "-o", prefill, "./clients/typescript/bench/prefill"], { cwd: repoRoot, stdio: "inherit" });
  const id = execFileSync(prefill, ["-state-dir", d.stateDir, "-events", String(EVENTS), "-cwd", d.dir], { encoding: "utf8" }).trim();
  await d.start();
  try {
    const bare: number[] = [];
    const client: number[] = [];
    for (let i = 0; i < 5; i++) {
      bare.push(await bareReplay(d.socket, id, EVENTS));
      client.push(await clientReplay(d.socket, id, EVENTS));
    }
    const b = median(bare);
    const c = median(client);
    console.log(`replay of ${EVENTS} events: bare reader ${b.toFixed(0)} ms (${(EVENTS / b * 1000).toFixed(0)} ev/s), ` +
      `client ${c.toFixed(0)} ms (${(EVENTS / c * 1000).toFixed(0)} ev/s): client/bare rate = ${(b / c).toFixed(2)}x (want >= 0.5x)`);
  } finally {
    await d.stop();
    rmSync(pfDir, { recursive: true, force: true });
  }
}

async function relayFigure(): Promise<void> {
  const d = await Daemon.start();
  const relay = await startRelay({ port: 0, socketPath: d.socket, tokenFile: join(d.dir, "token") });
  const c = await SessiondClient.connect({ socketPath: d.socket });
  const phone = await Phone.connect(relay.url, relay.token);
  try {
    const direct: number[] = [];
    const relayed: number[] = [];
    for (let i = 0; i < ROUNDS + 2; i++) {
      const a = (await c.create({ provider: "echo", cwd: d.dir })).sessionId;
      const t0 = performance.now();
      await c.hold({ sessionId: a, holderId: "desk" });
      const sub = await c.attach(a);
      await c.send({ sessionId: a, text: "hi" });
      for await (const e of sub) if (e.type === "message.delta") break;
      const t1 = performance.now();
      const b = (await c.create({ provider: "echo", cwd: d.dir })).sessionId;
      const t2 = performance.now();
      await phone.call("agentSession.hold", { sessionId: b, holderId: "phone" });
      const { subscriptionId } = await phone.call<{ subscriptionId: string }>("agentSession.attach", { sessionId: b });
      await phone.call("agentSession.send", { sessionId: b, text: "hi" });
      await phone.until((e) => e.sessionId === b && e.type === "message.delta");
      const t3 = performance.now();
      if (i >= 2) { // warm-up rounds dropped
        direct.push(t1 - t0);
        relayed.push(t3 - t2);
      }
      await phone.call("agentSession.detach", { subscriptionId }); // a phone has at most maxStreamsPerPhone
      await c.closeSession(a);
      await c.closeSession(b);
    }
    const dm = median(direct);
    const rm = median(relayed);
    console.log(`hold+send+first delta (median of ${ROUNDS}): client ${dm.toFixed(1)} ms, relay ${rm.toFixed(1)} ms: ` +
      `relay/client = ${(rm / dm).toFixed(2)}x (want <= 2x)`);
  } finally {
    await phone.drop();
    c.close();
    await relay.close();
    await d.stop();
  }
}

await replayFigure();
await relayFigure();
