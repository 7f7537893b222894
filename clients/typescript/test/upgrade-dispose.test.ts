// daemon.upgrade's answer reaches a vscode-jsonrpc client that disposes its
// connection as soon as it closes (`onClose(() => dispose())`, a common
// pattern): vscode-jsonrpc runs its close handler before a message that
// arrived with the close, so an answer followed at once by the socket's
// end would be lost and the upgrade reported failed. The caller is
// attached to a session streaming a /flood turn, 20 upgrades in a row.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { connect } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createMessageConnection, StreamMessageReader, StreamMessageWriter, type MessageConnection } from "vscode-jsonrpc/node.js";
import { Daemon, sessiondBinary } from "./daemon.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 240_000) };
const caps = ["agent-session.attach.v1", "agent-session.structured.hold.v1", "agent-session.turns.v1", "daemon.upgrade.v1"];
const upgrades = 20;

let d: Daemon;
let cwd: string;

before(async () => {
  d = await Daemon.start();
  cwd = mkdtempSync(join(tmpdir(), "sdud-"));
});
after(async () => {
  await d?.stop();
  if (cwd) rmSync(cwd, { recursive: true, force: true });
});

/** A vscode-jsonrpc connection (Content-Length framing) that disposes
 * itself when the socket closes; closed resolves then. */
type Ev = { seq: number; type: string };

/** Events seen on every connection: the latest seq and how many turns
 * completed; waiters are woken by each event. */
const seen = { lastSeq: 0, completed: 0, waiters: [] as (() => void)[] };
function until(pred: () => boolean): Promise<void> {
  return new Promise((res) => {
    const check = () => {
      if (pred()) res();
      else seen.waiters.push(check);
    };
    check();
  });
}

async function dial(): Promise<{ conn: MessageConnection; closed: Promise<void>; isClosed: () => boolean }> {
  const sock = connect(d.socket);
  await new Promise<void>((res, rej) => {
    sock.once("connect", res);
    sock.once("error", rej);
  });
  const conn = createMessageConnection(new StreamMessageReader(sock), new StreamMessageWriter(sock));
  conn.onNotification("agentSession.event", (p: { event: Ev }) => {
    if (p.event.seq > seen.lastSeq) {
      seen.lastSeq = p.event.seq;
      if (p.event.type === "turn.completed") seen.completed++;
    }
    const w = seen.waiters.splice(0);
    for (const f of w) f();
  });
  let gone = false;
  const closed = new Promise<void>((res) => conn.onClose(() => {
    gone = true;
    conn.dispose();
    res();
  }));
  conn.onError(() => {}); // a reset is a close here
  conn.listen();
  await conn.sendRequest("initialize", { protocolVersion: 1, client: { name: "upgrade-dispose", version: "0" }, capabilities: caps });
  return { conn, closed, isClosed: () => gone };
}

test("daemon.upgrade during a /flood turn: every answer reaches a client that disposes on close", T, async () => {
  const setup = await dial();
  const s = (await setup.conn.sendRequest("agentSession.create", { provider: "echo", cwd })) as { sessionId: string };
  setup.conn.dispose();
  const bin = sessiondBinary(); // the same binary reads its own handoff format
  let lost = 0;
  let reused = 0;
  let midTurn = 0;
  const failures: string[] = [];
  for (let i = 0; i < upgrades; i++) {
    const { conn, closed, isClosed } = await dial();
    await conn.sendRequest("agentSession.hold", { sessionId: s.sessionId, holderId: `h${i}` });
    await conn.sendRequest("agentSession.attach", { sessionId: s.sessionId, afterSeq: seen.lastSeq });
    await until(() => seen.completed === i); // the previous turn has ended
    const base = seen.lastSeq;
    await conn.sendRequest("agentSession.send", { sessionId: s.sessionId, text: "/flood 40000 64" });
    await until(() => seen.lastSeq >= base + 20); // streaming
    try {
      const res = (await conn.sendRequest("daemon.upgrade", { binary: bin })) as { pid: number; toVersion: string };
      assert.equal(res.pid, d.proc!.pid);
      if (seen.completed === i) midTurn++; // its turn.completed not seen yet: the turn was open
    } catch (e) {
      lost++;
      failures.push(`#${i}: ${(e as Error).message}`);
      await closed;
      continue;
    }
    // The connection is the new image's, initialized with its
    // capabilities: it takes calls (the old image's holds and
    // subscriptions ended with it) and is not closed under the client.
    if (isClosed()) {
      failures.push(`#${i}: the connection was closed after the answer`);
      continue;
    }
    try {
      await conn.sendRequest("agentSession.hold", { sessionId: s.sessionId, holderId: `h${i}` });
      reused++;
    } catch (e) {
      failures.push(`#${i} after the answer: ${(e as Error).message}`);
    }
    conn.dispose();
  }
  // Let the last flood end before the daemon stops.
  const last = await dial();
  await last.conn.sendRequest("agentSession.hold", { sessionId: s.sessionId, holderId: "end" });
  await last.conn.sendRequest("agentSession.attach", { sessionId: s.sessionId, afterSeq: seen.lastSeq });
  await until(() => seen.completed === upgrades);
  last.conn.dispose();
  console.log(`upgrade-dispose: ${upgrades} upgrades, ${lost} answers lost, ${reused} connections reused, ${midTurn} answered before their turn's end was seen`);
  assert.equal(lost, 0, `lost answers:\n${failures.join("\n")}\n${d.log.split("\n").filter((l) => l.includes("upgrade")).join("\n")}`);
  assert.equal(reused, upgrades, failures.join("\n"));
});
