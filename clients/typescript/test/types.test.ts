// The typed surface: Event narrows by type, closed sets are literal
// unions (a wrong one does not compile: the @ts-expect-error lines fail the
// build when the type is a plain string), typed client events return
// Disposable, negotiated is the connection's, and await using closes.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Daemon } from "./daemon.js";
import * as pkg from "../src/index.js";
import { SessiondClient, DEFAULT_CAPABILITIES, type Event, type RespondParams, type SessionInfo, type Subscription } from "../src/index.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };
let d: Daemon;
before(async () => (d = await Daemon.start()));
after(async () => await d?.stop());

/** Compile-time: a check of e.type narrows e.data. */
export function statusOf(e: Event): "completed" | "interrupted" | "failed" | undefined {
  if (e.type === "turn.completed") return e.data.status;
  if (e.type === "message.delta") {
    const t: string = e.data.text;
    void t;
  }
  return undefined;
}

// @ts-expect-error "yes" is no decision
export const badDecision: RespondParams["decision"] = "yes";
/** Compile-time: a Subscription's state is not the consumer's to change. */
export function meddle(sub: Subscription): void {
  // @ts-expect-error cursor is read-only
  sub.cursor = 0;
  // @ts-expect-error so is the bound
  sub.highWaterMarkBytes = 1;
}

// @ts-expect-error "running" is no session state
export const badState: SessionInfo["state"] = "running";

test("negotiated is client ∩ server, beside all the server offers; has() asks it", T, async () => {
  const c = await SessiondClient.connect({ socketPath: d.socket, capabilities: ["agent-session.attach.v1", "no.such.v9"] });
  try {
    assert.deepEqual(c.negotiated, ["agent-session.attach.v1"]);
    assert.ok(c.server.capabilities.includes("agent-session.structured.hold.v1"), "the server offers holds");
    assert.equal(c.has("agent-session.structured.hold.v1"), false, "this connection did not negotiate them");
    assert.equal(c.has("agent-session.attach.v1"), true);
  } finally {
    c.close();
  }
});

test("typed client events return a Disposable; await using closes the client and resolves closed", T, async () => {
  let seen = 0;
  let outer: SessiondClient | undefined;
  {
    await using c = await SessiondClient.connect({ socketPath: d.socket, capabilities: DEFAULT_CAPABILITIES });
    outer = c;
    const sub = c.onReconnecting(() => seen++);
    assert.equal(c.listenerCount("reconnecting"), 1);
    sub.dispose();
    assert.equal(c.listenerCount("reconnecting"), 0, "dispose removed the handler");
    {
      using s2 = c.onEvent("disconnected", (e: Error) => void e.message);
      void s2;
      assert.equal(c.listenerCount("disconnected"), 1);
    }
    assert.equal(c.listenerCount("disconnected"), 0, "using disposed it at the end of its scope");
  }
  await outer!.closed;
  await assert.rejects(outer!.status(), /closed/i);
  assert.equal(seen, 0);
});

test("a Subscription's state is private: read-only views, no writable field, the state's key not exported", T, async () => {
  const c = await SessiondClient.connect({ socketPath: d.socket });
  try {
    const { sessionId } = await c.create({ provider: "echo", cwd: d.dir });
    const sub = await c.attach(sessionId, { highWaterMarkBytes: 1 << 20 });
    assert.equal(sub.highWaterMarkBytes, 1 << 20);
    const cursor = sub.cursor;
    assert.throws(() => ((sub as unknown as { cursor: number }).cursor = cursor + 5), TypeError);
    assert.equal(sub.cursor, cursor);
    assert.deepEqual(Object.keys(sub).filter((k) => !["sessionId"].includes(k) && !k.startsWith("_")).filter((k) =>
      ["cursor", "delivered", "generation", "paused", "queuedBytes", "highWaterMark", "subscriptionId"].includes(k)), [], "no state as own fields");
    assert.equal("internal" in pkg, false);
    sub.close();
  } finally {
    c.close();
  }
});
