// Origin through the relay: a phone's turns and answers carry the relay's
// client name and the phone's identity as the device (PROTOCOL.md
// "Attention").
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Daemon } from "./daemon.js";
import { Phone } from "./phone.js";
import { SessiondClient } from "../src/index.js";
import { startRelay, type Relay } from "../relay/relay.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };
let d: Daemon;
let relay: Relay;
let direct: SessiondClient;
let tokenDir: string;

before(async () => {
  d = await Daemon.start();
  tokenDir = mkdtempSync(join(tmpdir(), "sdro-"));
  relay = await startRelay({ port: 0, socketPath: d.socket, tokenFile: join(tokenDir, "token"), log: () => {} });
  direct = await SessiondClient.connect({ socketPath: d.socket, client: { name: "desktop", version: "1.0.0" } });
});
after(async () => {
  direct?.close();
  await relay?.close();
  await d?.stop();
  if (tokenDir) rmSync(tokenDir, { recursive: true, force: true });
});

type Origin = { client: string; connectionId: string; device?: string };

test("a phone's turn and answer carry the phone as the device, a desktop's none", T, async () => {
  const id = (await direct.create({ provider: "echo", cwd: d.dir })).sessionId;
  const phone = await Phone.connect(relay.url, relay.token, "pixel-8");
  try {
    await phone.call("agentSession.hold", { sessionId: id, holderId: "p:1", ttlMs: 600_000 });
    await phone.call("agentSession.attach", { sessionId: id });
    await phone.call("agentSession.send", { sessionId: id, text: "/approve" });
    const req = (await phone.until((e) => e.type === "approval.requested")).find((e) => e.type === "approval.requested")!;
    await direct.respond({ sessionId: id, requestId: (req.data as { requestId: string }).requestId, decision: "approve" });
    await phone.until((e) => e.type === "turn.completed");
    const evs = (await direct.read({ sessionId: id, afterSeq: 0 })).events;
    const started = evs.find((e) => e.type === "turn.started")!.data as { origin?: Origin };
    assert.equal(started.origin?.client, "sessiond-relay");
    assert.equal(started.origin?.device, "phone:pixel-8");
    assert.match(started.origin?.connectionId ?? "", /^c-/);
    const resolved = evs.find((e) => e.type === "approval.resolved")!.data as { origin?: Origin };
    assert.deepEqual(resolved.origin, { client: "desktop", connectionId: direct.server.connectionId });
  } finally {
    await phone.drop();
  }
});
