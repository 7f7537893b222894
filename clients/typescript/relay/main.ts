#!/usr/bin/env node
// sessiond-relay [--host H] [--port P] [--token-file F] [--socket S] [--hold-ttl-ms N]
//   [--max-hold-ttl-ms N] [--max-holds-per-phone N] [--max-holds N]
//   [--max-in-flight N] [--max-buffered-bytes N] [--max-message-bytes N] [--max-phones N]
//   [--max-streams-per-phone N] [--ping-interval-ms N] [--ping-timeout-ms N]
//   [--auth-max-failures N] [--auth-lockout-ms N] [--auth-max-lockout-ms N] [--auth-log-interval-ms N]
import { parseArgs } from "node:util";
import { DaemonUnavailableError, startRelay, type Relay } from "./relay.js";
import type { RelayLimits } from "./limits.js";
import type { AuthLimits } from "./auth.js";

const LIMIT_FLAGS: Record<string, keyof RelayLimits> = {
  "hold-ttl-ms": "holdTtlMs",
  "max-hold-ttl-ms": "maxHoldTtlMs",
  "max-holds-per-phone": "maxHoldsPerPhone",
  "max-holds": "maxHolds",
  "max-in-flight": "maxInFlight",
  "max-buffered-bytes": "maxBufferedBytes",
  "max-message-bytes": "maxMessageBytes",
  "max-phones": "maxPhones",
  "max-streams-per-phone": "maxStreamsPerPhone",
  "ping-interval-ms": "pingIntervalMs",
  "ping-timeout-ms": "pingTimeoutMs",
};
const AUTH_FLAGS: Record<string, keyof AuthLimits> = {
  "auth-max-failures": "authMaxFailures",
  "auth-lockout-ms": "authLockoutMs",
  "auth-max-lockout-ms": "authMaxLockoutMs",
  "auth-log-interval-ms": "authLogIntervalMs",
};
const { values } = parseArgs({
  options: {
    host: { type: "string" },
    port: { type: "string" },
    "token-file": { type: "string" },
    socket: { type: "string" },
    ...Object.fromEntries([...Object.keys(LIMIT_FLAGS), ...Object.keys(AUTH_FLAGS)].map((f) => [f, { type: "string" as const }])),
  },
});
const v = values as Record<string, string | undefined>;
const limits: Partial<RelayLimits> = {};
for (const [flag, key] of Object.entries(LIMIT_FLAGS)) {
  if (v[flag] !== undefined) limits[key] = Number(v[flag]);
}
const authLimits: Partial<AuthLimits> = {};
for (const [flag, key] of Object.entries(AUTH_FLAGS)) {
  if (v[flag] !== undefined) authLimits[key] = Number(v[flag]);
}
let relay: Relay;
try {
  relay = await startRelay({
    host: v.host,
    port: v.port ? Number(v.port) : undefined,
    tokenFile: v["token-file"],
    socketPath: v.socket,
    ...limits,
    ...authLimits,
  });
} catch (e) {
  // One line, no stack: what is wrong and what to do.
  if (e instanceof DaemonUnavailableError && e.newToken) {
    console.log(`sessiond-relay: new bearer token (saved in ${e.newToken.tokenFile}): ${e.newToken.token}`);
  }
  console.error(`sessiond-relay: ${(e as Error)?.message ?? String(e)}`);
  process.exit(1);
}
if (relay.tokenCreated) console.log(`sessiond-relay: new bearer token (saved): ${relay.token}`);
console.log(`sessiond-relay: listening on ${relay.url}`);
// SIGTERM or SIGINT: every phone is closed and the relay exits 0 within
// STOP_MS whatever is still under way (a phone's daemon connection, a
// reconnect, a write to a phone that does not read); a second signal exits
// at once.
const STOP_MS = 1500;
let stopping = false;
const stop = (sig: string) => {
  if (stopping) process.exit(0);
  stopping = true;
  setTimeout(() => {
    console.error(`sessiond-relay: ${sig}: not closed within ${STOP_MS} ms, exiting anyway`);
    process.exit(0);
  }, STOP_MS);
  relay.close().then(() => {
    console.log(`sessiond-relay: ${sig}: stopped`);
    process.exit(0);
  }, (e: unknown) => {
    console.error(`sessiond-relay: ${sig}: close failed: ${(e as Error)?.message ?? String(e)}`);
    process.exit(0);
  });
};
process.on("SIGINT", () => stop("SIGINT"));
process.on("SIGTERM", () => stop("SIGTERM"));
