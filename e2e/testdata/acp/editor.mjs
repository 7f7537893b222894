// An editor made of the official ACP SDK (the pinned
// @agentclientprotocol/sdk's ClientApp, the 2.x successor of
// ClientSideConnection) driving `sessiond acp` over its stdio.
// usage: node editor.mjs SDK_DIR BIN SOCKET CWD
// Prints one JSON object: what each step saw.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, bin, socket, cwd] = process.argv.slice(2);
const acp = await import(pathToFileURL(path.join(sdkDir, "dist/v1/stable/acp.js")).href);

function bridge() {
  const child = spawn(bin, ["acp", "--socket", socket], { stdio: ["pipe", "pipe", "inherit"] });
  const updates = [];
  const permissions = [];
  const app = acp.client()
    .onNotification("session/update", (cx) => { updates.push(cx.params.update); })
    .onRequest("session/request_permission", (cx) => {
      permissions.push(cx.params);
      const allow = cx.params.options.find((o) => o.kind === "allow_once");
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    });
  const conn = app.connect(acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout)));
  const exited = new Promise((resolve) => child.on("exit", resolve));
  return { child, conn, agent: conn.agent, updates, permissions, exited };
}

const text = (ups, kind) => ups.filter((u) => u.sessionUpdate === kind).map((u) => u.content.text).join("");
const out = {};

const a = bridge();
const init = await a.agent.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
out.capabilities = init.agentCapabilities;
const { sessionId } = await a.agent.request("session/new", { cwd, mcpServers: [] });
out.sessionId = sessionId;
let r = await a.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "hello sdk" }] });
out.hello = { stopReason: r.stopReason, text: text(a.updates, "agent_message_chunk") };
a.updates.length = 0;
r = await a.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "/work" }] });
out.work = {
  stopReason: r.stopReason,
  permissions: a.permissions.length,
  kinds: [...new Set(a.updates.map((u) => u.sessionUpdate))].sort(),
  executeFinal: a.updates.filter((u) => u.sessionUpdate === "tool_call_update" && u.kind === "execute").map((u) => u.status),
};
const list = await a.agent.request("session/list", { cwd });
out.list = list.sessions.map((s) => s.sessionId);
a.child.stdin.end();
await a.exited;

const b = bridge();
await b.agent.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
await b.agent.request("session/load", { sessionId, cwd, mcpServers: [] });
out.load = {
  users: b.updates.filter((u) => u.sessionUpdate === "user_message_chunk").map((u) => u.content.text),
  text: text(b.updates, "agent_message_chunk"),
  permissions: b.permissions.length,
};
await b.agent.request("session/close", { sessionId });
b.child.stdin.end();
await b.exited;
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
