import { createServer, type IncomingMessage, type Server } from "node:http";
import type { Duplex } from "node:stream";
import { join } from "node:path";
import { WebSocketServer } from "ws";
import { SessiondClient, type ClientOptions } from "../src/client.js";
import { resolveStateDir } from "../src/socket.js";
import { bearer, loadOrCreateToken, tokenMatches } from "./token.js";
import { Phone } from "./phone.js";

export interface RelayOptions {
  /** Listen address (default 127.0.0.1) and port (default 8787; 0 = any). */
  host?: string;
  port?: number;
  /** Bearer token file (default <state-dir>/relay/token), created 0600. */
  tokenFile?: string;
  /** The daemon's socket (default resolved as the daemon does). */
  socketPath?: string;
  /** Largest phone frame answered (default 1 MiB); bigger frames get an
   * error, and frames past 16x this close the phone's connection. */
  maxMessageBytes?: number;
  /** ttl of a phone's hold when it names none (default 120 s). */
  holdTtlMs?: number;
}

export { RELAYED_METHODS } from "./methods.js";

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
  const limit = opts.maxMessageBytes ?? 1 << 20;
  const clientOpts: ClientOptions = { socketPath: opts.socketPath, client: { name: "sessiond-relay", version: "0.1.0" } };
  const holds = await SessiondClient.connect(clientOpts);
  const http: Server = createServer((_, res) => res.writeHead(426).end("websocket only\n"));
  const wss = new WebSocketServer({ noServer: true, maxPayload: 16 * limit });
  http.on("upgrade", (req: IncomingMessage, sock: Duplex, head: Buffer) => {
    // Node drops its own error listener before "upgrade": a peer that
    // resets the connection would otherwise crash the relay.
    sock.on("error", () => sock.destroy());
    if (!tokenMatches(bearer(req.headers.authorization), token)) {
      sock.end("HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      return;
    }
    wss.handleUpgrade(req, sock, head, (ws) => new Phone(ws, holds, clientOpts, limit, opts.holdTtlMs ?? 120_000).start());
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
      await new Promise<void>((res) => http.close(() => res()));
      holds.close();
    },
  };
}

