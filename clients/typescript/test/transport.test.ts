// The command transport: the client runs `sessiond proxy` (a local
// command here; test/transport-ssh.test.ts runs it through a real sshd)
// and speaks the protocol on its stdio, reconnecting through it.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Daemon, sessiondBinary } from "./daemon.js";
import { exitOf, killMidStream, pidsOf, recorded } from "./transport-helpers.js";
import { SessiondClient } from "../src/index.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };
let d: Daemon;

before(async () => {
  d = await Daemon.start();
});
after(async () => {
  await d?.stop();
});

test("transport command: sessiond proxy's stdio is the connection; killed mid-stream, it is run again, re-holds and resumes gapless; close() ends it", T, async () => {
  const pidFile = join(d.dir, "proxy.pids");
  const c = await SessiondClient.connect({
    socketPath: join(d.dir, "nothing-here.sock"), // only the command reaches the daemon
    transport: { command: recorded(pidFile, [sessiondBinary(), "proxy", "--socket", d.socket]) },
    reconnect: { initialDelayMs: 20, maxDelayMs: 200, maxAttempts: 20 },
  });
  try {
    await killMidStream(c, d.dir, pidFile, () => pidsOf(pidFile)[0]!);
  } finally {
    c.close();
  }
  await c.closed;
  await exitOf(pidsOf(pidFile)[1]!); // close() ended the command
});

test("transport command that cannot run or exits at once: connect rejects naming it", T, async () => {
  await assert.rejects(SessiondClient.connect({ transport: { command: [join(d.dir, "no-such-command")] }, reconnect: false }),
    (e: NodeJS.ErrnoException) => e.code === "ENOENT");
  await assert.rejects(SessiondClient.connect({ transport: { command: ["sh", "-c", "echo no daemon here >&2; exit 3"] }, reconnect: false }),
    (e: Error) => /transport command sh exited 3: no daemon here/.test(String(e.cause ?? e) + String((e.cause as Error | undefined)?.cause ?? "")));
});
