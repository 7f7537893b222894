import { randomBytes, randomUUID } from "node:crypto";
import type { WebSocket, RawData } from "ws";
import { SessiondClient, type ClientOptions } from "../src/client.js";
import { ConnectionClosedError, DaemonUnavailableError, InvalidParamsError, MessageTooLargeError, SessiondError, StreamLostError } from "../src/errors.js";
import type { Subscription } from "../src/subscription.js";
import { METHOD_CAPABILITY, type MethodName } from "../src/generated/types.js";
import { RELAYED_METHODS } from "./methods.js";
import { FRAME_MARGIN, HoldLedger, RelayError, type RelayLimits } from "./limits.js";
import { ByteBudget, REPLY_BUDGET, replyCost } from "./budget.js";
import type { AttentionNotice } from "../src/generated/types.js";

/** The relay's own method: {on?: boolean} (default true) turns the
 * daemon.attention notifications of every session on (or off) for this
 * phone; answers {on}. */
export const RELAY_ATTENTION = "relay.attention";

type Json = Record<string, unknown>;

/** What every phone shares: the relay's hold connection and its ledger,
 * the limits, and the relay's log. */
export interface PhoneShared {
  holds: SessiondClient;
  ledger: HoldLedger;
  clientOpts: ClientOptions;
  limits: RelayLimits;
  log: (msg: string, fields: Json) => void;
}

/** The notification that ends one relayed stream:
 * {subscriptionId, sessionId, reason, message}. */
export const STREAM_LOST = "relay.streamLost";

/** WebSocket close code of a phone whose unread output passed the limit. */
export const CLOSE_NOT_READING = 1008;

/** How long a phone closed for not reading has to take the close frame
 * before its socket is terminated. */
const CLOSE_GRACE_MS = 1000;

let phones = 0;

/** Pings a phone may send per pingIntervalMs: past it the phone is closed
 * 1008 (ping flood). */
export const MAX_PINGS_PER_INTERVAL = 1024;

/** Longest string id the relay echoes back (characters). */
const MAX_ID_LENGTH = 1024;

/** The daemon's bound on clientMessageId (bytes). */
const MAX_MESSAGE_ID = 256;

/** One phone connection. identity: the name the phone gave (header
 * x-sessiond-phone or ?phone=), else one of this connection alone. Its
 * holds and clientMessageIds are its own: another identity cannot take
 * them over without the holdToken, and equal ids of two phones never
 * meet on the daemon. */
export class Phone {
  readonly id = `p-${++phones}`;
  private client: Promise<SessiondClient> | undefined;
  private subs = new Map<string, Subscription>();
  private closed = false;
  private inFlight = 0;
  /** Replies of its calls on their way from the daemon (REPLY_BUDGET):
   * a call waits, in flight, until the replies before it have passed. */
  private replies = new ByteBudget(REPLY_BUDGET);
  /** Bytes of its requests in flight (their frames): at most
   * 2 x (maxMessageBytes + FRAME_MARGIN). */
  private requestBytes = 0;
  /** Attaches under way (counted against maxStreamsPerPhone). */
  private attaching = 0;
  /** Notifications (requests without an id) of session methods, which
   * are not run: the first is logged, the count when the phone goes. */
  private droppedNotifications = 0;
  /** The phone asked for daemon.attention (relay.attention), and how
   * many were not sent because its output was backed up. */
  private attentionOn = false;
  private attentionDropped = 0;

  constructor(private ws: WebSocket, private sh: PhoneShared, readonly identity: string = `anon-${randomUUID()}`) {}

  private pingTimer: NodeJS.Timeout | undefined;
  private pongTimer: NodeJS.Timeout | undefined;
  /** The nonce of the relay's heartbeat ping that waits for its pong. */
  private pingNonce: Buffer | undefined;
  /** A pong to the phone is written and not yet gone to the kernel; the
   * latest ping since (answered once it has), and how many came. */
  private pongOut = false;
  private pingOwed: Buffer | undefined;
  /** Pings of the phone in the window that began at pingWindow. */
  private pings = 0;
  private pingWindow = 0;
  /** Pumps waiting for the phone to take its output down to half of
   * maxBufferedBytes, and whether a ping is out to tell when. */
  private drainWaiters: Array<() => void> = [];
  private drainArmed = false;
  /** Its streams waited for it once (logged once). */
  private backedUp = false;

  start(): void {
    this.heartbeat();
    this.ws.on("message", (data: RawData, isBinary: boolean) => void this.onFrameGuarded(data, isBinary));
    this.ws.on("close", () => this.end());
    this.ws.on("error", (e: Error) => {
      this.sh.log("phone error", { phone: this.id, error: e.message });
      this.end();
    });
  }

  /** Pings the phone every pingIntervalMs with a nonce; one that has not
   * answered that ping (a pong carrying the nonce) within pingTimeoutMs is
   * terminated (its "close" ends the rest). A pong that answers no ping of
   * the relay's (unsolicited, or an earlier nonce) counts for nothing. */
  private heartbeat(): void {
    const { pingIntervalMs, pingTimeoutMs } = this.sh.limits;
    this.ws.on("pong", (data: Buffer) => {
      if (this.pingNonce === undefined || !data.equals(this.pingNonce)) return;
      this.pingNonce = undefined;
      clearTimeout(this.pongTimer);
      this.pongTimer = undefined;
    });
    this.ws.on("ping", (data: Buffer) => this.onPing(data));
    this.pingTimer = setInterval(() => {
      if (this.closed || this.pongTimer) return;
      this.pingNonce = randomBytes(16);
      this.pongTimer = setTimeout(() => {
        if (this.closed) return;
        this.sh.log("phone closed: no pong", { phone: this.id, ping_timeout_ms: pingTimeoutMs });
        this.end();
        this.ws.terminate();
      }, pingTimeoutMs);
      this.ws.ping(this.pingNonce);
    }, pingIntervalMs);
  }

  /** The phone's pings are answered here (the server runs with autoPong
   * off): one pong at a time, counted in bufferedAmount like every other
   * frame; pings that come while it is not out yet wait for it, and are
   * answered by one pong for the latest (RFC 6455 5.5.3), so pongs a
   * phone does not read never pile up. More than MAX_PINGS_PER_INTERVAL
   * pings in a pingIntervalMs is a flood: closed 1008. */
  private onPing(data: Buffer, owed = false): void {
    if (this.closed) return;
    if (!owed) {
      const now = Date.now();
      if (now - this.pingWindow >= this.sh.limits.pingIntervalMs) {
        this.pingWindow = now;
        this.pings = 0;
      }
      if (++this.pings > MAX_PINGS_PER_INTERVAL) {
        this.closeNotReading("phone closed: ping flood", `over ${MAX_PINGS_PER_INTERVAL} pings in ${this.sh.limits.pingIntervalMs} ms`,
          { pings: this.pings, ping_interval_ms: this.sh.limits.pingIntervalMs });
        return;
      }
    }
    if (this.pongOut) {
      this.pingOwed = data;
      return;
    }
    if (!this.fits(data.length + 2)) return;
    this.pongOut = true;
    this.ws.pong(data, false, () => {
      this.pongOut = false;
      const owed = this.pingOwed;
      this.pingOwed = undefined;
      if (owed) this.onPing(owed, true);
    });
  }

  /** Whether bytes more fit under maxBufferedBytes; if not, the phone is
   * closed 1008 (not reading). */
  private fits(bytes: number): boolean {
    const max = this.sh.limits.maxBufferedBytes;
    if (this.ws.bufferedAmount + bytes <= max) return true;
    this.closeNotReading("phone closed: not reading", `over ${max} bytes of unread output (maxBufferedBytes)`,
      { buffered_bytes: this.ws.bufferedAmount, max_buffered_bytes: max });
    return false;
  }

  /** Closes a phone that does not take its output: 1008, logged once; its
   * frames are read no more, and since the close frame cannot reach a
   * phone that does not read, the socket is terminated after CLOSE_GRACE_MS. */
  private closeNotReading(msg: string, reason: string, fields: Json): void {
    if (this.closed) return;
    this.sh.log(msg, { phone: this.id, ...fields });
    this.end();
    this.ws.close(CLOSE_NOT_READING, reason);
    this.ws.pause();
    setTimeout(() => this.ws.terminate(), CLOSE_GRACE_MS).unref();
  }

  private own(): Promise<SessiondClient> {
    if (!this.client) {
      // The phone's identity is the device of its turns' and answers' origin.
      const client = { ...(this.sh.clientOpts.client ?? { name: "sessiond-relay", version: "0.1.0" }), device: `phone:${this.identity}` };
      const c = SessiondClient.connect({ ...this.sh.clientOpts, client });
      this.client = c;
      // A stream the phone does not take paused at its high-water mark:
      // logged the first time per phone.
      let paused = false;
      c.then((cl) => cl.on("attention", (n: AttentionNotice) => this.onAttention(n)), () => undefined);
      c.then((cl) => cl.on("streamPaused", (p: { sessionId: string; queuedBytes: number }) => {
        if (paused) return;
        paused = true;
        this.sh.log("phone stream paused", { phone: this.id, session_id: p.sessionId, queued_bytes: p.queuedBytes });
      }), () => undefined);
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
    clearInterval(this.pingTimer);
    clearTimeout(this.pongTimer);
    for (const w of this.drainWaiters.splice(0)) w();
    this.replies.end();
    if (this.attentionDropped > 1) {
      this.sh.log("phone attention dropped", { phone: this.id, count: this.attentionDropped });
    }
    if (this.droppedNotifications > 1) {
      this.sh.log("phone notifications dropped", { phone: this.id, count: this.droppedNotifications });
    }
    for (const s of this.subs.values()) s.close();
    this.subs.clear();
    this.client?.then((c) => c.close(), () => undefined);
  }

  /** Sends a frame unless the phone's unread output would pass
   * maxBufferedBytes: then the phone is closed (1008), logged once. */
  private send(frame: string): boolean {
    if (this.closed || this.ws.readyState !== this.ws.OPEN) return false;
    if (!this.fits(Buffer.byteLength(frame))) return false;
    this.ws.send(frame);
    return true;
  }

  /** Resolves once the phone has at most half of maxBufferedBytes unread
   * (true), or is gone (false). Every stream of the phone waits on the
   * same ping: its write callback runs once everything before it went to
   * the kernel. */
  private async room(): Promise<boolean> {
    const high = this.sh.limits.maxBufferedBytes / 2;
    while (!this.closed && this.ws.readyState === this.ws.OPEN && this.ws.bufferedAmount > high) {
      if (!this.backedUp) {
        this.backedUp = true;
        this.sh.log("phone output backed up", { phone: this.id, buffered_bytes: this.ws.bufferedAmount, max_buffered_bytes: this.sh.limits.maxBufferedBytes });
      }
      await new Promise<void>((res) => {
        this.drainWaiters.push(res);
        if (this.drainArmed) return;
        this.drainArmed = true;
        this.ws.ping(undefined, undefined, () => {
          this.drainArmed = false;
          for (const w of this.drainWaiters.splice(0)) w();
        });
      });
    }
    return !this.closed && this.ws.readyState === this.ws.OPEN;
  }

  private reply(id: unknown, body: Json): void {
    this.send(JSON.stringify({ jsonrpc: "2.0", id, ...body }));
  }

  private error(id: unknown, code: number, message: string, data: Json): void {
    this.reply(id ?? null, { error: { code, message, data } });
  }

  /** No exception of a frame's handling escapes it (an unhandled
   * rejection would end the relay and every phone): one that does is
   * logged, answered -32603 when the frame's id is known, and the phone
   * stays connected. */
  private async onFrameGuarded(data: RawData, isBinary: boolean): Promise<void> {
    try {
      await this.onFrame(data, isBinary);
    } catch (e) {
      this.sh.log("phone frame failed", { phone: this.id, error: String((e as Error)?.message ?? e).slice(0, 200) });
      try {
        this.error(null, -32603, "the relay failed to handle this frame", { reason: "internal_error" });
      } catch {
        // nothing more to tell the phone
      }
    }
  }

  private async onFrame(data: RawData, isBinary: boolean): Promise<void> {
    const limit = this.sh.limits.maxMessageBytes;
    const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    if (buf.length > limit) {
      return this.error(null, -32600, `message of ${buf.length} bytes is over the relay's limit of ${limit}`,
        { reason: "message_too_large", limit });
    }
    let msg: Json;
    try {
      msg = JSON.parse(buf.toString("utf8")) as Json;
    } catch {
      return this.error(null, -32700, `not JSON${isBinary ? " (binary frame)" : ""}: ${JSON.stringify(buf.subarray(0, 32).toString("utf8"))}`,
        { reason: "parse_error" });
    }
    if (Array.isArray(msg)) {
      return this.error(null, -32600, "batches are not supported by the relay: send one request per frame", { reason: "batch_not_supported" });
    }
    if (!msg || typeof msg !== "object") {
      return this.error(null, -32600, "not a JSON-RPC 2.0 request: not an object", { reason: "invalid_request" });
    }
    // JSON-RPC 2.0: an id is a string, a number or null. Anything else
    // (an object, an array nested thousands deep) is never echoed back.
    const id = msg.id;
    if (id !== undefined && id !== null && typeof id !== "string" && typeof id !== "number") {
      return this.error(null, -32600, `id must be a string, a number or null, not ${Array.isArray(id) ? "an array" : typeof id}`,
        { reason: "invalid_request", field: "id" });
    }
    if (typeof id === "number" && !Number.isSafeInteger(id)) {
      // 1e400 parses as Infinity (stringified null), 2^100 loses digits:
      // neither could be echoed as sent, so the call is not run.
      return this.error(null, -32600, "a numeric id must be an integer of at most 2^53-1 (send a string id otherwise)",
        { reason: "invalid_request", field: "id" });
    }
    if (typeof id === "string" && id.length > MAX_ID_LENGTH) {
      return this.error(null, -32600, `id is ${id.length} characters, over the relay's limit of ${MAX_ID_LENGTH}`,
        { reason: "invalid_request", field: "id", limit: MAX_ID_LENGTH });
    }
    if (msg.jsonrpc !== "2.0" || typeof msg.method !== "string") {
      return this.error(id, -32600, `not a JSON-RPC 2.0 request: ${msg.jsonrpc !== "2.0" ? "jsonrpc is not \"2.0\"" : "method is not a string"}`,
        { reason: "invalid_request", field: msg.jsonrpc !== "2.0" ? "jsonrpc" : "method" });
    }
    const method = msg.method;
    if (!RELAYED_METHODS.has(method) && method !== RELAY_ATTENTION) {
      // A daemon method the relay keeps from phones (admin, initialize …)
      // is named as such; anything else is unknown.
      const known = Object.hasOwn(METHOD_CAPABILITY, method);
      return this.error(id, -32601, known ? `${method} is not relayed (session methods only)`
        : `method not found: ${JSON.stringify(method.slice(0, 64))}`,
        { reason: known ? "method_not_relayed" : "method_not_found", method: method.slice(0, 64) });
    }
    if (id === undefined) {
      // A notification: no method of the relay's is one, so it is not run
      // (nothing could tell the phone how it went). Logged once per phone.
      if (this.droppedNotifications++ === 0) {
        this.sh.log("phone notification dropped", { phone: this.id, method, reason: "session methods are requests: give them an id" });
      }
      return;
    }
    if (msg.params !== undefined && (msg.params === null || typeof msg.params !== "object" || Array.isArray(msg.params))) {
      const kind = msg.params === null ? "null" : Array.isArray(msg.params) ? "an array" : typeof msg.params;
      return this.error(id, -32602, `params of ${method} must be an object (by name), not ${kind}`,
        { reason: "invalid_params", field: "params" });
    }
    const max = this.sh.limits.maxInFlight;
    if (this.inFlight >= max) {
      return this.error(id, -32019, `${this.inFlight} calls of this phone are being answered, the relay's limit (maxInFlight ${max})`,
        { reason: "limit_exceeded", limit: "phone_calls", max });
    }
    // The request waits here with its frame: what waits is bounded too
    // (one frame alone always fits).
    const maxRequests = 2 * (limit + FRAME_MARGIN);
    if (this.inFlight > 0 && this.requestBytes + buf.length > maxRequests) {
      return this.error(id, -32019, `this phone's calls being answered hold ${this.requestBytes} bytes of requests; ${buf.length} more would pass the relay's limit of ${maxRequests} (2 x (maxMessageBytes + FRAME_MARGIN))`,
        { reason: "limit_exceeded", limit: "phone_request_bytes", max: maxRequests });
    }
    this.inFlight++;
    this.requestBytes += buf.length;
    const params = (msg.params ?? {}) as Json;
    const cost = replyCost(method);
    let reserved = false;
    try {
      // Its reply is counted from before the call goes to the daemon until
      // it is in bufferedAmount (sent) or dropped.
      reserved = await this.replies.take(cost);
      if (!reserved) return;
      if (!(await this.room())) return;
      this.reply(id, { result: await this.forward(method as MethodName, params) });
    } catch (e) {
      if (e instanceof SessiondError || e instanceof RelayError) this.error(id, e.code, e.message, e.data);
      else if (e instanceof InvalidParamsError) this.error(id, -32602, e.message, { reason: "invalid_params" });
      else if (e instanceof DaemonUnavailableError) {
        // Not a wire error of its own (PROTOCOL.md has none): -32603 with
        // data.cause naming it, retryable, the socket and how to start it.
        this.error(id, -32603, `the relay cannot reach sessiond: ${e.message}`,
          { reason: "internal_error", cause: "daemon_unavailable", retryable: true, socketPath: e.socketPath });
      } else if (e instanceof MessageTooLargeError) this.error(id, -32600, e.message, { reason: "message_too_large", limit: e.limit });
      else this.error(id, -32603, (e as Error).message, { reason: "internal_error" });
    } finally {
      if (reserved) this.replies.give(cost);
      this.requestBytes -= buf.length;
      this.inFlight--;
    }
  }

  private async forward(method: MethodName, p: Json): Promise<unknown> {
    switch (method as string) {
      case RELAY_ATTENTION: {
        if (p.on !== undefined && typeof p.on !== "boolean") {
          throw new RelayError(-32602, "on must be a boolean", { reason: "invalid_params", field: "on" });
        }
        const on = p.on ?? true;
        // Notices come on the phone's own daemon connection (connected
        // now if it was not), which negotiated daemon.attention.v1.
        if (on) await this.own();
        this.attentionOn = on as boolean;
        return { on };
      }
      case "agentSession.hold":
        return this.hold(p as { sessionId: string; holderId: string; ttlMs?: number });
      case "agentSession.release": {
        // The holdToken is required: the shared connection would fill in
        // the current one, and any phone could end any phone's hold.
        if (typeof p.holdToken !== "string" || p.holdToken === "") {
          throw new RelayError(-32602, "release needs the holdToken the hold returned", { reason: "invalid_params", field: "holdToken" });
        }
        const r = await this.sh.holds.release({ ...(p as { sessionId: string; holderId: string; holdToken: string }), holderId: phoneHolder(p.holderId) });
        if (r.released) this.sh.ledger.drop(holdKey(p));
        return r;
      }
      case "agentSession.send": {
        const c = await this.own();
        return c.send({ ...(p as { sessionId: string; text: string }), clientMessageId: this.messageId(p.clientMessageId) });
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

  /** A daemon.attention notice, to a phone that asked for them. It is
   * small, but a phone that does not read must not gather them: while
   * half of maxBufferedBytes is unread it is dropped, never queued (the
   * first logged, the count when the phone goes). */
  private onAttention(n: AttentionNotice): void {
    if (!this.attentionOn || this.closed) return;
    const frame = JSON.stringify({ jsonrpc: "2.0", method: "daemon.attention", params: n });
    if (this.ws.bufferedAmount + Buffer.byteLength(frame) > this.sh.limits.maxBufferedBytes / 2) {
      if (this.attentionDropped++ === 0) {
        this.sh.log("phone attention dropped", { phone: this.id, session_id: n.sessionId, kind: n.kind,
          buffered_bytes: this.ws.bufferedAmount, max_buffered_bytes: this.sh.limits.maxBufferedBytes });
      }
      return;
    }
    this.send(frame);
  }

  /** The daemon's clientMessageId of a phone's: prefixed with the phone's
   * identity (two phones counting from "1" never meet); absent or empty:
   * a new one (the relay's own retry is then still a duplicate). */
  private messageId(v: unknown): string {
    const prefix = `${this.identity}/`;
    if (v === undefined || v === null || v === "") return prefix + randomUUID();
    const max = MAX_MESSAGE_ID - Buffer.byteLength(prefix);
    if (typeof v !== "string" || Buffer.byteLength(v) > max) {
      throw new RelayError(-32602, `clientMessageId must be a string of at most ${max} bytes`,
        { reason: "invalid_params", field: "clientMessageId", limit: max });
    }
    return prefix + v;
  }

  /** The phone's holds live on the relay's shared connection, with a ttl
   * (at most maxHoldTtlMs), at most maxHoldsPerPhone of them per phone. */
  private async hold(q: { sessionId: string; holderId: string; ttlMs?: number; holdToken?: unknown }): Promise<unknown> {
    const { holdToken, ...p } = q;
    const { holdTtlMs, maxHoldTtlMs } = this.sh.limits;
    const ttlMs = p.ttlMs ?? holdTtlMs;
    if (typeof ttlMs === "number" && ttlMs > maxHoldTtlMs) {
      throw new RelayError(-32602, `ttlMs ${ttlMs} is over the relay's limit of ${maxHoldTtlMs} (maxHoldTtlMs)`,
        { reason: "invalid_params", field: "ttlMs", limit: maxHoldTtlMs });
    }
    const taken = this.sh.ledger.take(this.identity, holdKey(p), Date.now() + (typeof ttlMs === "number" ? ttlMs : holdTtlMs), holdToken);
    try {
      const r = await this.sh.holds.hold({ ...p, holderId: phoneHolder(p.holderId), ttlMs });
      taken.given(r.holdToken);
      return r;
    } catch (e) {
      taken.undo();
      throw e;
    }
  }

  /** Streams a session to the phone: {subscriptionId, session, lastSeq}
   * answers, then every event after afterSeq as agentSession.event
   * notifications, in seq order, across daemon restarts and lag. */
  private async attach(p: Json): Promise<unknown> {
    const max = this.sh.limits.maxStreamsPerPhone;
    if (this.subs.size + this.attaching >= max) {
      throw new RelayError(-32019, `this phone has ${this.subs.size + this.attaching} streams attached, the relay's limit (maxStreamsPerPhone ${max})`,
        { reason: "limit_exceeded", limit: "phone_streams", max });
    }
    this.attaching++;
    try {
      return await this.attachNow(p);
    } finally {
      this.attaching--;
    }
  }

  private async attachNow(p: Json): Promise<unknown> {
    if (p.afterSeq !== undefined && !(Number.isSafeInteger(p.afterSeq) && (p.afterSeq as number) >= 0)) {
      throw new RelayError(-32602, "afterSeq must be a non-negative integer of at most 2^53-1",
        { reason: "invalid_params", field: "afterSeq" });
    }
    const c = await this.own();
    const sessionId = p.sessionId as string;
    const session = await c.get(sessionId);
    // A phone's stream keeps at most 1/16 of maxBufferedBytes (and 1024
    // events) queued on the relay: past it that stream alone is paused and
    // resumes from its cursor, so a phone with many streams it does not
    // read cannot fill the relay's memory.
    const sub = await c.attach(sessionId, { afterSeq: (p.afterSeq as number) ?? 0,
      highWaterMark: 1024, highWaterMarkBytes: Math.max(64 << 10, Math.floor(this.sh.limits.maxBufferedBytes / 16)) });
    const subscriptionId = `r-${randomUUID()}`;
    if (this.closed) {
      sub.close();
      throw new RelayError(-32603, "the phone went while attaching", { reason: "connection_closed" });
    }
    this.subs.set(subscriptionId, sub);
    setImmediate(() => void this.pump(subscriptionId, sub));
    return { subscriptionId, session, events: [], lastSeq: session.lastSeq, hasMore: false };
  }

  /** Events wait while the phone has half of maxBufferedBytes unread (the
   * stream then backs up into its queue, which pauses it past its
   * high-water mark); a frame that would pass maxBufferedBytes closes the
   * phone 1008 as any other output does. */
  private async pump(subscriptionId: string, sub: Subscription): Promise<void> {
    try {
      for await (const event of sub) {
        if (!(await this.room())) break;
        const frame = JSON.stringify({ jsonrpc: "2.0", method: "agentSession.event", params: { subscriptionId, event } });
        if (!this.send(frame)) break;
      }
    } catch (e) {
      // Only this stream ends (its session is gone after a daemon restart,
      // say): the phone is told which and why, and stays connected.
      this.subs.delete(subscriptionId);
      if (this.closed) return;
      const reason = e instanceof StreamLostError ? e.reason
        : e instanceof ConnectionClosedError ? "connection_closed" : "stream_failed";
      this.sh.log("phone stream lost", { phone: this.id, session_id: sub.sessionId, subscription_id: subscriptionId, reason });
      this.send(JSON.stringify({ jsonrpc: "2.0", method: STREAM_LOST,
        params: { subscriptionId, sessionId: sub.sessionId, reason, message: (e as Error).message } }));
    }
  }
}

/** Prefix of every holder id a phone names, on the daemon: a phone's
 * holderId "x" is "phone:x" there, so no phone can name (and re-home,
 * cut short with a small ttl, or release) a holder of another surface,
 * the desktop's "desktop-chat:1" say. */
export const PHONE_HOLDER_PREFIX = "phone:";

function phoneHolder(v: unknown): string {
  if (typeof v !== "string") throw new RelayError(-32602, "holderId must be a string", { reason: "invalid_params", field: "holderId" });
  return PHONE_HOLDER_PREFIX + v;
}

function holdKey(p: Json): string {
  return `${String(p.sessionId)}\u0000${String(p.holderId)}`;
}
