#!/usr/bin/env node
// sessiond-relay [--host H] [--port P] [--token-file F] [--socket S] [--hold-ttl-ms N]
import { parseArgs } from "node:util";
import { startRelay } from "./relay.js";

const { values } = parseArgs({
  options: {
    host: { type: "string" },
    port: { type: "string" },
    "token-file": { type: "string" },
    socket: { type: "string" },
    "hold-ttl-ms": { type: "string" },
  },
});
const relay = await startRelay({
  host: values.host,
  port: values.port ? Number(values.port) : undefined,
  tokenFile: values["token-file"],
  socketPath: values.socket,
  holdTtlMs: values["hold-ttl-ms"] ? Number(values["hold-ttl-ms"]) : undefined,
});
if (relay.tokenCreated) console.log(`sessiond-relay: new bearer token (saved): ${relay.token}`);
console.log(`sessiond-relay: listening on ${relay.url}`);
const stop = () => void relay.close().then(() => process.exit(0));
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
