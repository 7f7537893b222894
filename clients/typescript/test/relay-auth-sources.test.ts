// Relay auth lockout against many sources: a locked-out source is not
// freed by failures from 4096 others, and failures count per IPv4 address
// (an IPv4-mapped one too) or per IPv6 /64.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WebSocket } from "ws";
import { Daemon } from "./daemon.js";
import { startRelay, type Relay } from "../relay/relay.js";
import { AuthGuard, DEFAULT_AUTH_LIMITS, MAX_AUTH_SOURCES, sourceKey } from "../relay/auth.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 120_000) };
let d: Daemon;
let dir: string;
let relay: Relay;

before(async () => {
  d = await Daemon.start();
  dir = mkdtempSync(join(tmpdir(), "sdras-"));
  relay = await startRelay({ port: 0, socketPath: d.socket, tokenFile: join(dir, "token"),
    authMaxFailures: 3, authLockoutMs: 60_000, authLogIntervalMs: 60_000, log: () => {} });
});
after(async () => {
  await relay?.close();
  await d?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function upgrade(token: string, localAddress: string): Promise<number> {
  const ws = new WebSocket(relay.url, { localAddress, headers: { authorization: `Bearer ${token}` } });
  return new Promise((res, rej) => {
    ws.once("open", () => {
      ws.close();
      res(101);
    });
    ws.once("unexpected-response", (_req, r) => {
      r.resume();
      res(r.statusCode!);
    });
    ws.once("error", rej);
  });
}

test("a locked-out source stays locked out after wrong tokens from MAX_AUTH_SOURCES other sources", T, async () => {
  const locked = "127.0.0.1";
  for (let i = 0; i < 3; i++) assert.equal(await upgrade("wrong", locked), 401);
  assert.equal(await upgrade(relay.token, locked), 429);
  for (let i = 0; i < MAX_AUTH_SOURCES; i++) {
    assert.equal(await upgrade("wrong", `127.1.${i >> 8}.${i & 255}`), 401);
  }
  assert.equal(await upgrade(relay.token, locked), 429, "the table's eviction freed a locked-out source");
  // Another source with the right token is still served.
  assert.equal(await upgrade(relay.token, "127.0.0.2"), 101);
});

test("failures count per IPv4 address, ::ffff:a.b.c.d as a.b.c.d, and per IPv6 /64", () => {
  assert.equal(sourceKey("::ffff:10.0.0.1"), "10.0.0.1");
  assert.equal(sourceKey("2001:db8:1:2::9"), sourceKey("2001:DB8:0001:0002:ffff:1:2:3"));
  assert.notEqual(sourceKey("2001:db8:1:2::9"), sourceKey("2001:db8:1:3::9"));
  const g = new AuthGuard({ ...DEFAULT_AUTH_LIMITS, authMaxFailures: 3, authLockoutMs: 60_000 }, () => {});
  g.failed("2001:db8:1:2::1", "wrong token");
  g.failed("2001:db8:1:2::2", "wrong token");
  g.failed("2001:db8:1:2:aaaa::3", "wrong token");
  assert.ok(g.lockedFor("2001:db8:1:2::ffff") > 0, "another address of the /64 is locked out too");
  assert.equal(g.lockedFor("2001:db8:1:3::1"), 0);
  g.failed("::ffff:10.0.0.1", "wrong token");
  g.failed("10.0.0.1", "wrong token");
  g.failed("::ffff:10.0.0.1", "wrong token");
  assert.ok(g.lockedFor("10.0.0.1") > 0);
});
