// daemon.attention through the client: asked for by default, a typed
// event returning a Disposable (PROTOCOL.md "Attention").
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Daemon } from "./daemon.js";
import { SessiondClient, DEFAULT_CAPABILITIES, type AttentionNotice } from "../src/index.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };
let d: Daemon;

before(async () => {
  d = await Daemon.start();
});
after(async () => {
  await d?.stop();
});

test("the default capabilities negotiate daemon.attention.v1 and onAttention gets a turn of a session this client never attached", T, async () => {
  assert.ok(DEFAULT_CAPABILITIES.includes("daemon.attention.v1"));
  await using watcher = await SessiondClient.connect({ socketPath: d.socket });
  await using driver = await SessiondClient.connect({ socketPath: d.socket });
  assert.ok(watcher.has("daemon.attention.v1"), `negotiated ${watcher.negotiated.join(",")}`);
  const got: AttentionNotice[] = [];
  let done!: () => void;
  const completed = new Promise<void>((r) => (done = r));
  const sub = watcher.onAttention((n) => {
    got.push(n);
    if (n.kind === "turn_completed") done();
  });
  const id = (await driver.create({ provider: "echo", cwd: d.dir })).sessionId;
  await driver.hold({ sessionId: id, holderId: "desktop:1" });
  await driver.send({ sessionId: id, text: "hello" });
  await completed;
  const n = got.find((x) => x.kind === "turn_completed")!;
  assert.equal(n.sessionId, id);
  assert.equal(typeof n.title, "string");
  assert.ok(!Number.isNaN(Date.parse(n.at)), n.at);
  // Disposed: the next turn's notice reaches another handler, not this one.
  sub.dispose();
  let again!: () => void;
  const second = new Promise<void>((r) => (again = r));
  const other = watcher.onAttention((x) => x.kind === "turn_completed" && again());
  const before = got.length;
  await driver.send({ sessionId: id, text: "again" });
  await second;
  other.dispose();
  assert.equal(got.length, before, "a disposed handler got nothing more");
});
