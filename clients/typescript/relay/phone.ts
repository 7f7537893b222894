import { randomUUID } from "node:crypto";
import type { WebSocket, RawData } from "ws";
import { SessiondClient, type ClientOptions } from "../src/client.js";
import { SessiondError } from "../src/errors.js";
import type { Subscription } from "../src/subscription.js";
import { METHOD_CAPABILITY, type MethodName } from "../src/generated/types.js";
import { RELAYED_METHODS } from "./methods.js";

type Json = Record<string, unknown>;

/** One phone connection. */
export class Phone {
  private client: Promise<SessiondClient> | undefined;
  private subs = new Map<string, Subscription>();
  private closed = false;

  constructor(
    private ws: WebSocket,
    private holds: SessiondClient,
    private clientOpts: ClientOptions,
    private limit: number,
    private ttlMs: number,
  ) {}

  start(): void {
    this.ws.on("message", (data: RawData, isBinary: boolean) => void this.onFrame(data, isBinary));
    this.ws.on("close", () => this.end());
    this.ws.on("error", () => this.end());
  }

  private own(): Promise<SessiondClient> {
    if (!this.client) {
      const c = SessiondClient.connect(this.clientOpts);
      this.client = c;
      // A connect that failed (the daemon was down) is not kept: the
      // phone's next call tries again.
      c.catch(() => {
        if (this.client === c) this.client = undefined;
      });
    }
    return this.client;
  }

  private end(): void {
    if (this.closed) return;
    this.closed = true;
    for (const s of this.subs.values()) s.close();
    this.subs.clear();
    this.client?.then((c) => c.close(), () => undefined);
  }

  private reply(id: unknown, body: Json): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, ...body }));
  }

  private error(id: unknown, code: number, message: string, data: Json): void {
    this.reply(id ?? null, { error: { code, message, data } });
  }

  private async onFrame(data: RawData, isBinary: boolean): Promise<void> {
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    if (buf.length > this.limit) {
      return this.error(null, -32600, `message of ${buf.length} bytes is over the relay's limit of ${this.limit}`,
        { reason: "message_too_large", limit: this.limit });
    }
    let msg: Json;
    try {
      msg = JSON.parse(buf.toString("utf8")) as Json;
    } catch {
      return this.error(null, -32700, `not JSON${isBinary ? " (binary frame)" : ""}: ${JSON.stringify(buf.subarray(0, 32).toString("utf8"))}`,
        { reason: "parse_error" });
    }
    const id = msg?.id;
    if (!msg || typeof msg !== "object" || Array.isArray(msg) || msg.jsonrpc !== "2.0" || typeof msg.method !== "string") {
      return this.error(id, -32600, "not a JSON-RPC 2.0 request", { reason: "invalid_request" });
    }
    const method = msg.method;
    if (!RELAYED_METHODS.has(method)) {
      // A daemon method the relay keeps from phones (admin, initialize …)
      // is named as such; anything else is unknown.
      const known = method in METHOD_CAPABILITY;
      return this.error(id, -32601, known ? `${method} is not relayed (session methods only)`
        : `method not found: ${JSON.stringify(method.slice(0, 64))}`,
        { reason: known ? "method_not_relayed" : "method_not_found", method: method.slice(0, 64) });
    }
    if (id === undefined) return; // a notification: nothing to answer
    const params = (msg.params && typeof msg.params === "object" ? msg.params : {}) as Json;
    try {
      this.reply(id, { result: await this.forward(method as MethodName, params) });
    } catch (e) {
      if (e instanceof SessiondError) this.error(id, e.code, e.message, e.data);
      else this.error(id, -32603, (e as Error).message, { reason: "internal_error" });
    }
  }

  private async forward(method: MethodName, p: Json): Promise<unknown> {
    switch (method) {
      case "agentSession.hold":
        // The phone's holds live on the relay's shared connection, with a ttl.
        return this.holds.hold({ ...(p as { sessionId: string; holderId: string }), ttlMs: (p.ttlMs as number) ?? this.ttlMs });
      case "agentSession.release":
        return this.holds.release(p as { sessionId: string; holderId: string; holdToken?: string });
      case "agentSession.send": {
        const c = await this.own();
        return c.send({ ...(p as { sessionId: string; text: string }), clientMessageId: (p.clientMessageId as string) ?? randomUUID() });
      }
      case "agentSession.attach":
        return this.attach(p);
      case "agentSession.detach": {
        const s = this.subs.get(p.subscriptionId as string);
        this.subs.delete(p.subscriptionId as string);
        s?.close();
        return {};
      }
      default:
        return (await this.own()).call(method, p as never);
    }
  }

  /** Streams a session to the phone: {subscriptionId, session, lastSeq}
   * answers, then every event after afterSeq as agentSession.event
   * notifications, in seq order, across daemon restarts and lag. */
  private async attach(p: Json): Promise<unknown> {
    const c = await this.own();
    const sessionId = p.sessionId as string;
    const session = await c.get(sessionId);
    const sub = await c.attach(sessionId, { afterSeq: (p.afterSeq as number) ?? 0 });
    const subscriptionId = `r-${randomUUID()}`;
    this.subs.set(subscriptionId, sub);
    setImmediate(() => void this.pump(subscriptionId, sub));
    return { subscriptionId, session, events: [], lastSeq: session.lastSeq, hasMore: false };
  }

  private async pump(subscriptionId: string, sub: Subscription): Promise<void> {
    try {
      for await (const event of sub) {
        if (this.ws.readyState !== this.ws.OPEN) break;
        const frame = JSON.stringify({ jsonrpc: "2.0", method: "agentSession.event", params: { subscriptionId, event } });
        if (this.ws.bufferedAmount > 4 * this.limit) {
          await new Promise<void>((res) => this.ws.send(frame, () => res())); // let the phone catch up
        } else this.ws.send(frame);
      }
    } catch {
      this.ws.close(1011, "stream failed");
    }
  }
}
