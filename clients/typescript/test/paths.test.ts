// Socket and state paths resolved as the daemon's internal/config does,
// for Linux (the XDG layout) and macOS (darwin: $TMPDIR, ~/Library).
import { test } from "node:test";
import assert from "node:assert/strict";
import { resolveSocketPath, resolveStateDir } from "../src/index.js";

const uid = process.getuid!();

test("socket path on linux: flag, $SESSIOND_SOCKET, $XDG_RUNTIME_DIR, /tmp/sessiond-$UID; $TMPDIR is not looked at", () => {
  assert.equal(resolveSocketPath("/x/s.sock", { TMPDIR: "/t" }, "linux"), "/x/s.sock");
  assert.equal(resolveSocketPath(undefined, { SESSIOND_SOCKET: "/a/b", XDG_RUNTIME_DIR: "/r", TMPDIR: "/t" }, "linux"), "/a/b");
  assert.equal(resolveSocketPath(undefined, { XDG_RUNTIME_DIR: "/run/user/7", TMPDIR: "/t" }, "linux"), "/run/user/7/sessiond/sessiond.sock");
  assert.equal(resolveSocketPath(undefined, { TMPDIR: "/t" }, "linux"), `/tmp/sessiond-${uid}/sessiond.sock`);
  assert.equal(resolveSocketPath(undefined, {}, "linux"), `/tmp/sessiond-${uid}/sessiond.sock`);
});

test("socket path on darwin: $XDG_RUNTIME_DIR first, then $TMPDIR/sessiond, then /tmp/sessiond-$UID", () => {
  const mac = "/var/folders/zz/abc/T/"; // macOS's $TMPDIR ends with a slash
  assert.equal(resolveSocketPath("/x/s.sock", { TMPDIR: mac }, "darwin"), "/x/s.sock");
  assert.equal(resolveSocketPath(undefined, { SESSIOND_SOCKET: "/a/b", TMPDIR: mac }, "darwin"), "/a/b");
  assert.equal(resolveSocketPath(undefined, { XDG_RUNTIME_DIR: "/r", TMPDIR: mac }, "darwin"), "/r/sessiond/sessiond.sock");
  assert.equal(resolveSocketPath(undefined, { TMPDIR: mac }, "darwin"), "/var/folders/zz/abc/T/sessiond/sessiond.sock");
  assert.equal(resolveSocketPath(undefined, { TMPDIR: "" }, "darwin"), `/tmp/sessiond-${uid}/sessiond.sock`);
  assert.equal(resolveSocketPath(undefined, {}, "darwin"), `/tmp/sessiond-${uid}/sessiond.sock`);
});

test("state dir on linux: flag, $SESSIOND_STATE_DIR, $XDG_STATE_HOME/sessiond, ~/.local/state/sessiond", () => {
  assert.equal(resolveStateDir("/s", { HOME: "/h" }, "linux"), "/s");
  assert.equal(resolveStateDir(undefined, { SESSIOND_STATE_DIR: "/e", XDG_STATE_HOME: "/x", HOME: "/h" }, "linux"), "/e");
  assert.equal(resolveStateDir(undefined, { XDG_STATE_HOME: "/x", HOME: "/h" }, "linux"), "/x/sessiond");
  assert.equal(resolveStateDir(undefined, { HOME: "/h" }, "linux"), "/h/.local/state/sessiond");
});

test("state dir on darwin: $XDG_STATE_HOME when set, else ~/Library/Application Support/sessiond", () => {
  assert.equal(resolveStateDir("/s", { HOME: "/Users/u" }, "darwin"), "/s");
  assert.equal(resolveStateDir(undefined, { SESSIOND_STATE_DIR: "/e", HOME: "/Users/u" }, "darwin"), "/e");
  assert.equal(resolveStateDir(undefined, { XDG_STATE_HOME: "/x", HOME: "/Users/u" }, "darwin"), "/x/sessiond");
  assert.equal(resolveStateDir(undefined, { HOME: "/Users/u" }, "darwin"), "/Users/u/Library/Application Support/sessiond");
});
