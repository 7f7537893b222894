// The packed @sessiond/client tarball, installed into a fresh app of each
// kind (CommonJS, ESM): require() and import both load it, talk to a real
// daemon, and find the relay and openrpc.json.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Daemon } from "./daemon.js";

const T = { timeout: Number(process.env.SESSIOND_TEST_TIMEOUT_MS ?? 120_000) };
const pkgRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
let d: Daemon;
let dir: string;
let tgz: string;

before(async () => {
  d = await Daemon.start();
  dir = mkdtempSync(join(tmpdir(), "sdpk-"));
  // The dist this run built, packed as npm publishes it.
  execFileSync("npm", ["pack", "--silent", "--pack-destination", dir], { cwd: pkgRoot, stdio: ["ignore", "ignore", "inherit"] });
  tgz = join(dir, readdirSync(dir).find((f) => f.endsWith(".tgz"))!);
});
after(async () => {
  await d?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function app(type: "commonjs" | "module", file: string, code: string): string {
  const proj = mkdtempSync(join(dir, `app-${type}-`));
  writeFileSync(join(proj, "package.json"), JSON.stringify({ name: "app", private: true, type }));
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", tgz], { cwd: proj, stdio: ["ignore", "ignore", "inherit"] });
  writeFileSync(join(proj, file), code);
  return execFileSync(process.execPath, [file], { cwd: proj, encoding: "utf8", env: { ...process.env, SESSIOND_SOCKET: d.socket } });
}

test("a CommonJS app require()s the client and the relay from the tarball, and talks to the daemon", T, () => {
  const out = JSON.parse(app("commonjs", "main.js", `
const { SessiondClient, SessiondError, PROTOCOL_VERSION } = require("@sessiond/client");
const { startRelay, DEFAULT_LIMITS } = require("@sessiond/client/relay");
const doc = require("@sessiond/client/openrpc.json");
(async () => {
  const c = await SessiondClient.connect({ reconnect: false });
  const st = await c.status();
  let code;
  try { await c.get("s-nope"); } catch (e) { code = e instanceof SessiondError ? e.code : String(e); }
  c.close();
  console.log(JSON.stringify({ pid: st.pid, code, v: PROTOCOL_VERSION, relay: typeof startRelay, maxPhones: DEFAULT_LIMITS.maxPhones, methods: doc.methods.length }));
})().catch((e) => { console.error(e); process.exit(1); });
`)) as { pid: number; code: number; v: number; relay: string; maxPhones: number; methods: number };
  assert.equal(out.pid, d.proc!.pid);
  assert.equal(typeof out.code, "number", "a daemon error is a SessiondError");
  assert.equal(out.relay, "function");
  assert.equal(out.maxPhones, 64);
  assert.ok(out.methods > 10, "openrpc.json is in the tarball");
});

test("an ESM app imports the client and the relay from the tarball, and talks to the daemon", T, () => {
  const out = JSON.parse(app("module", "main.js", `
import { SessiondClient } from "@sessiond/client";
import { startRelay } from "@sessiond/client/relay";
const c = await SessiondClient.connect({ reconnect: false });
const st = await c.status();
c.close();
console.log(JSON.stringify({ pid: st.pid, relay: typeof startRelay }));
`)) as { pid: number; relay: string };
  assert.equal(out.pid, d.proc!.pid);
  assert.equal(out.relay, "function");
});

/** The js block that follows heading in README.md. */
function readmeBlock(heading: string): string {
  const readme = readFileSync(join(pkgRoot, "README.md"), "utf8");
  const at = readme.indexOf(heading);
  assert.ok(at >= 0, `README has "${heading}"`);
  const m = /```js\n([\s\S]*?)```/.exec(readme.slice(at));
  assert.ok(m, `a js block after "${heading}"`);
  return m[1]!;
}

test("the README's CommonJS and ESM examples run as written, each in a fresh app of its kind from the tarball", T, () => {
  const esm = app("module", "main.js", readmeBlock("An ESM app"));
  assert.match(esm.trim(), /^\S+$/, "the ESM example prints the daemon's version");
  const cjs = app("commonjs", "main.js", readmeBlock("A CommonJS app"));
  assert.equal(cjs.trim(), "-32010 session_not_found", "the CommonJS example prints the SessiondError's code and reason");
});
