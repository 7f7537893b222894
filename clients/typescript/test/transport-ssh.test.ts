// The command transport through a real OpenSSH server on 127.0.0.1
// (internal/testkit/sshtest: installed when missing, keys made here):
// the client runs `ssh HOST sessiond proxy`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { Daemon, repoRoot, sessiondBinary } from "./daemon.js";
import { deltaText, untilTurnCompleted } from "./helpers.js";
import { exitOf, killMidStream, pidsOf, recorded } from "./transport-helpers.js";
import { SessiondClient } from "../src/index.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };
let d: Daemon;
let sshd: ChildProcess | undefined;
let server: { host: string; config: string; binDir: string };

/** Builds and runs `sshtest serve` (a test sshd whose sessions find the
 * daemon binary as `sessiond` and the test daemon's socket). */
async function startSshd(env: string[]): Promise<void> {
  const bin = join(repoRoot, "clients", "typescript", ".bin", "sshtest-serve");
  mkdirSync(join(bin, ".."), { recursive: true });
  execFileSync("go", ["build", "-o", bin, "./internal/testkit/sshtest/serve"], { cwd: repoRoot, stdio: "inherit" });
  const p = spawn(bin, ["--sessiond", sessiondBinary(), ...env.flatMap((kv) => ["--env", kv])], { stdio: ["pipe", "pipe", "inherit"] });
  sshd = p;
  server = await new Promise((resolve, reject) => {
    let out = "";
    p.stdout!.setEncoding("utf8");
    p.stdout!.on("data", (s: string) => {
      out += s;
      if (out.includes("\n")) resolve(JSON.parse(out.slice(0, out.indexOf("\n"))));
    });
    p.once("exit", (code) => reject(new Error(`sshtest serve exited ${code} (sshd could not be installed or started; see its stderr)`)));
  });
}

before(async () => {
  d = await Daemon.start();
  await startSshd([`SESSIOND_SOCKET=${d.socket}`, "GORACE=atexit_sleep_ms=0"]);
});
after(async () => {
  if (sshd && sshd.exitCode === null) {
    const gone = new Promise((res) => sshd!.once("exit", res));
    sshd.stdin!.end();
    await gone;
  }
  await d?.stop();
});

function sshCommand(): string[] {
  return ["ssh", "-F", server.config, server.host, "sessiond", "proxy"];
}

test("over ssh: create, hold, send and stream through `ssh HOST sessiond proxy`", T, async () => {
  const c = await SessiondClient.connect({ socketPath: join(d.dir, "nothing-here.sock"), transport: { command: sshCommand() }, reconnect: false });
  try {
    const id = (await c.create({ provider: "echo", cwd: d.dir, title: "over ssh" })).sessionId;
    assert.equal((await c.hold({ sessionId: id, holderId: "desk:ssh" })).state, "live");
    const sub = await c.attach(id);
    const { turnId } = await c.send({ sessionId: id, text: "hello over ssh" });
    assert.equal(deltaText(await untilTurnCompleted(sub, turnId), turnId), "echo: hello over ssh");
    sub.close();
  } finally {
    c.close();
  }
  await c.closed;
});

test("over ssh: killing ssh mid-stream → it reconnects, re-holds and resumes gapless", T, async () => {
  const pidFile = join(d.dir, "ssh.pids");
  const c = await SessiondClient.connect({
    socketPath: join(d.dir, "nothing-here.sock"),
    transport: { command: recorded(pidFile, sshCommand()) },
    reconnect: { initialDelayMs: 20, maxDelayMs: 200, maxAttempts: 20 },
  });
  try {
    await killMidStream(c, d.dir, pidFile, () => pidsOf(pidFile)[0]!);
  } finally {
    c.close();
  }
  await c.closed;
  await exitOf(pidsOf(pidFile)[1]!);
});
