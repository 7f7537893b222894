import { createServer, type IncomingMessage, type Server } from "node:http";
import type { Duplex } from "node:stream";
import { join } from "node:path";
import { WebSocketServer } from "ws";
import { SessiondClient, type ClientOptions } from "../src/client.js";
import { resolveSocketPath, resolveStateDir } from "../src/socket.js";
import { DaemonUnavailableError as ClientDaemonUnavailableError } from "../src/errors.js";
import { bearer, loadOrCreateToken, tokenMatches } from "./token.js";
import { Phone, type PhoneShared } from "./phone.js";
import { FRAME_MARGIN, HoldLedger, resolveLimits, type RelayLimits } from "./limits.js";
import { AuthGuard, resolveAuthLimits, type AuthLimits } from "./auth.js";

export interface RelayOptions extends Partial<RelayLimits>, Partial<AuthLimits> {
  /** Listen address (default 127.0.0.1) and port (default 8787; 0 = any). */
  host?: string;
  port?: number;
  /** Bearer token file (default <state-dir>/relay/token), created 0600. */
  tokenFile?: string;
  /** The daemon's socket (default resolved as the daemon does). */
  socketPath?: string;
  /** Where the relay logs (default: one JSON line on stderr). */
  log?: (msg: string, fields: Record<string, unknown>) => void;
}

export { RELAYED_METHODS } from "./methods.js";
export { DEFAULT_LIMITS, FRAME_MARGIN, type RelayLimits } from "./limits.js";
export { CLOSE_NOT_READING } from "./phone.js";
export { DEFAULT_AUTH_LIMITS, type AuthLimits } from "./auth.js";

/** startRelay found no daemon on the socket. newToken: the token file
 * this start created (print it: the next start reuses it). */
export class DaemonUnavailableError extends ClientDaemonUnavailableError {
  constructor(socketPath: string, cause: unknown, readonly newToken?: { token: string; tokenFile: string }) {
    super("startRelay", socketPath, cause instanceof ClientDaemonUnavailableError ? cause.cause : cause);
  }
}

export interface Relay {
  readonly url: string;
  readonly port: number;
  readonly token: string;
  /** True when this start created the token file. */
  readonly tokenCreated: boolean;
  close(): Promise<void>;
}

/**
 * Starts the reference mobile relay: a WebSocket server (JSON-RPC 2.0, one
 * message per frame) that forwards a phone's session calls to the daemon.
 * Holds go through one shared daemon connection with a ttl, so a phone
 * that drops off the network keeps its session for the ttl and re-homes by
 * holding again on return; each phone's streams and sends use a daemon
 * connection of its own, closed when the phone goes.
 */
export async function startRelay(opts: RelayOptions = {}): Promise<Relay> {
  const tokenFile = opts.tokenFile ?? join(resolveStateDir(), "relay", "token");
  const { token, created } = loadOrCreateToken(tokenFile);
  const limits = resolveLimits(opts);
  const authLimits = resolveAuthLimits(opts);
  const log = opts.log ?? ((msg, fields) => console.error(JSON.stringify({ time: new Date().toISOString(), msg, ...fields })));
  const auth = new AuthGuard(authLimits, log);
  const clientOpts: ClientOptions = { socketPath: opts.socketPath, client: { name: "sessiond-relay", version: "0.1.0" } };
  let holds: SessiondClient;
  try {
    holds = await SessiondClient.connect(clientOpts);
  } catch (e) {
    throw new DaemonUnavailableError(resolveSocketPath(opts.socketPath), e, created ? { token, tokenFile } : undefined);
  }
  holds.on("reconnected", () => log("daemon connection restored", { holds: holds.heldCount }));
  const shared: PhoneShared = { holds, ledger: new HoldLedger(limits), clientOpts, limits, log };
  const http: Server = createServer((_, res) => res.writeHead(426).end("websocket only\n"));
  const wss = new WebSocketServer({ noServer: true, maxPayload: limits.maxMessageBytes + FRAME_MARGIN, autoPong: false });
  const socks = new Set<Duplex>(); // close() ends them all, mid-handshake too
  let phones = 0; // accepted upgrades whose socket is still open
  let refusing = false; // maxPhones refusal logged, until below it again
  http.on("upgrade", (req: IncomingMessage, sock: Duplex, head: Buffer) => {
    // Node drops its own error listener before "upgrade": a peer that
    // resets the connection would otherwise crash the relay.
    sock.on("error", () => sock.destroy());
    socks.add(sock);
    sock.once("close", () => socks.delete(sock));
    // A source that presented too many wrong tokens is refused without
    // a look at this one, until its lockout ends (README "Authentication").
    const source = req.socket.remoteAddress ?? "unknown";
    const locked = auth.lockedFor(source);
    if (locked > 0) {
      sock.end(`HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nRetry-After: ${Math.ceil(locked / 1000)}\r\nContent-Type: text/plain\r\n\r\n` +
        `too many wrong tokens from ${source}: try again in ${Math.ceil(locked / 1000)} s\n`);
      return;
    }
    const presented = bearer(req.headers.authorization);
    if (!tokenMatches(presented, token)) {
      auth.failed(source, presented === undefined ? "no bearer token" : "wrong token");
      sock.end("HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      return;
    }
    auth.passed(source);
    const identity = phoneIdentity(req);
    if (identity === null) {
      sock.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\n" +
        "phone identity (x-sessiond-phone or ?phone=) must match [A-Za-z0-9._:-]{1,64}\n");
      return;
    }
    if (phones >= limits.maxPhones) {
      if (!refusing) log("phone refused: too many phones", { phones, max_phones: limits.maxPhones });
      refusing = true;
      sock.end(`HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\n` +
        `${phones} phones connected, the relay's limit (maxPhones ${limits.maxPhones})\n`);
      return;
    }
    phones++;
    sock.once("close", () => {
      if (--phones < limits.maxPhones) refusing = false;
    });
    wss.handleUpgrade(req, sock, head, (ws) => new Phone(ws, shared, identity).start());
  });
  await new Promise<void>((res, rej) => {
    http.once("error", rej);
    http.listen(opts.port ?? 8787, opts.host ?? "127.0.0.1", () => res());
  });
  const addr = http.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  return {
    url: `ws://${opts.host ?? "127.0.0.1"}:${port}`,
    port,
    token,
    tokenCreated: created,
    async close() {
      for (const ws of wss.clients) ws.terminate();
      for (const s of socks) s.destroy();
      http.closeAllConnections();
      await new Promise<void>((res) => http.close(() => res()));
      holds.close();
    },
  };
}

/** The identity a phone names (header x-sessiond-phone, or ?phone= in the
 * URL): undefined when it names none, null when it is malformed. */
function phoneIdentity(req: IncomingMessage): string | undefined | null {
  const h = req.headers["x-sessiond-phone"];
  const v = typeof h === "string" ? h : new URL(req.url ?? "/", "http://relay").searchParams.get("phone") ?? undefined;
  if (v === undefined) return undefined;
  return /^[A-Za-z0-9._:-]{1,64}$/.test(v) ? v : null;
}
