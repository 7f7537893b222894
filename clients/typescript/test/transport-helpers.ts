// Shared by the command-transport tests (transport*.test.ts).
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { deltaText, gapless, until, untilTurnCompleted } from "./helpers.js";
import type { SessiondClient, Event } from "../src/index.js";

/** Resolves when process pid has exited (it need not be our child). */
export function exitOf(pid: number): Promise<unknown> {
  return promisify(execFile)("tail", [`--pid=${pid}`, "-f", "/dev/null"]);
}

/** The pids the wrapper recorded, one per run of the command. */
export function pidsOf(pidFile: string): number[] {
  return readFileSync(pidFile, "utf8").split("\n").filter(Boolean).map(Number);
}

/** `sh -c` that records its pid in pidFile, then execs argv (so the
 * recorded pid is argv's process). */
export function recorded(pidFile: string, argv: string[]): string[] {
  return ["sh", "-c", 'echo $$ >> "$0"; shift; exec "$@"', pidFile, "--", ...argv];
}

/** The flood's deltas: their numbers, zero-padded to width. */
export function numbered(n: number, width: number): string {
  let s = "";
  for (let i = 0; i < n; i++) s += String(i).padStart(width, "0");
  return s;
}

/**
 * create, hold, send and stream through the transport; kill its process
 * (killProc) mid-stream while the turn is blocked halfway through a flood
 * (echo's /split on a FIFO): the client runs the command again, re-holds,
 * and the stream resumes with no gap once the turn goes on.
 */
export async function killMidStream(c: SessiondClient, cwd: string, pidFile: string, killPid: () => number): Promise<void> {
  const id = (await c.create({ provider: "echo", cwd, title: "transport" })).sessionId;
  const h = await c.hold({ sessionId: id, holderId: "desk:t" });
  assert.equal(h.state, "live");
  const sub = await c.attach(id);
  const first = await c.send({ sessionId: id, text: "hi" });
  assert.equal(deltaText(await untilTurnCompleted(sub, first.turnId), first.turnId), "echo: hi");

  const fifo = join(cwd, `split-${process.pid}`);
  execFileSync("mkfifo", [fifo]);
  const n = 2000, width = 8;
  const { turnId } = await c.send({ sessionId: id, text: `/flood ${n} ${width} /numbered /split ${fifo}` });
  const evs: Event[] = [];
  let text = "";
  await until(sub, (e) => {
    if (e.type === "message.delta" && e.turnId === turnId) text += (e.data as { text: string }).text;
    return text.length >= (n / 2 - 1) * width;
  }, evs);
  const reconnected = new Promise((res) => c.once("reconnected", res));
  const killed = killPid();
  process.kill(killed, "SIGKILL");
  await reconnected;
  writeFileSync(fifo, ""); // the turn goes on
  await untilTurnCompleted(sub, turnId, evs);
  assert.equal(gapless(evs), undefined);
  assert.equal(deltaText(evs, turnId), numbered(n, width));
  assert.deepEqual((await c.get(id)).holders, ["desk:t"], "re-held over the new connection");
  assert.equal(pidsOf(pidFile).length, 2, "the command ran again");
  sub.close();
}

