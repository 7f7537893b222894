// Failed relay authentication: logged once per interval with what was
// suppressed, and a source that keeps presenting wrong tokens is locked out.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WebSocket } from "ws";
import { Daemon } from "./daemon.js";
import { Phone } from "./phone.js";
import { startRelay, type Relay } from "../relay/relay.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 60_000) };
let d: Daemon;
let dir: string;
let relay: Relay;
const logs: Array<{ msg: string; fields: Record<string, unknown> }> = [];

before(async () => {
  d = await Daemon.start();
  dir = mkdtempSync(join(tmpdir(), "sdra-"));
  relay = await startRelay({ port: 0, socketPath: d.socket, tokenFile: join(dir, "token"),
    authMaxFailures: 3, authLockoutMs: 60_000, authLogIntervalMs: 60_000,
    log: (msg, fields) => void logs.push({ msg, fields }) });
});
after(async () => {
  await relay?.close();
  await d?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The HTTP status (and Retry-After) of an upgrade from localAddress. */
function upgrade(token: string | undefined, localAddress = "127.0.0.1"): Promise<{ status: number; retryAfter?: string; body: string; ws?: WebSocket }> {
  const ws = new WebSocket(relay.url, { localAddress, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });
  return new Promise((res, rej) => {
    ws.once("open", () => res({ status: 101, body: "", ws }));
    ws.once("unexpected-response", (_req, r) => {
      let body = "";
      r.on("data", (b: Buffer) => (body += b.toString()));
      r.on("end", () => res({ status: r.statusCode!, retryAfter: r.headers["retry-after"] as string | undefined, body }));
    });
    ws.once("error", rej);
  });
}

test("wrong tokens are logged once per interval with a suppressed count; past authMaxFailures the source is locked out (429, Retry-After, the right token too); another source is served", T, async () => {
  assert.equal((await upgrade(relay.token + "x")).status, 401);
  assert.equal((await upgrade(undefined)).status, 401);
  assert.equal((await upgrade("wrong-" + relay.token)).status, 401);
  const bad = logs.filter((l) => l.msg === "phone refused: bad token");
  assert.equal(bad.length, 1, JSON.stringify(logs));
  assert.deepEqual({ ...bad[0]!.fields }, { source: "127.0.0.1", reason: "wrong token", failures: 1, suppressed: 0 });
  const locked = logs.filter((l) => l.msg === "phone source locked out");
  assert.equal(locked.length, 1, JSON.stringify(logs));
  assert.equal(locked[0]!.fields.failures, 3);
  assert.equal(locked[0]!.fields.suppressed, 2, "the two failures not logged are counted");
  assert.equal(locked[0]!.fields.lockout_ms, 60_000);
  // Locked out: the right token is not even looked at.
  const r = await upgrade(relay.token);
  assert.equal(r.status, 429);
  assert.ok(Number(r.retryAfter) > 0 && Number(r.retryAfter) <= 60, String(r.retryAfter));
  assert.match(r.body, /too many wrong tokens from 127\.0\.0\.1/);
  await assert.rejects(Phone.connect(relay.url, relay.token), /HTTP 429/);
  assert.equal(logs.filter((l) => l.msg === "phone refused: bad token").length, 1, "lockout refusals are no failures to log");
  // Another source is not locked out.
  const other = await upgrade(relay.token, "127.0.0.2");
  assert.equal(other.status, 101);
  other.ws!.terminate();
});
