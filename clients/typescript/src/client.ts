import { EventEmitter } from "node:events";
import { randomUUID } from "node:crypto";
import { Link, messageBytes } from "./link.js";
import { Subscription, eventBytes, type SubscriptionOwner } from "./subscription.js";
import { resolveSocketPath } from "./socket.js";
import { ClientClosedError, ConnectionClosedError, SessiondError, StreamLostError } from "./errors.js";
import {
  PROTOCOL_VERSION,
  type AttachResult,
  type Event,
  type EventNotice,
  type HoldParams,
  type HoldResult,
  type InitializeResult,
  type LaggedNotice,
  type MethodName,
  type Methods,
} from "./generated/types.js";

/** Capabilities a client asks for unless told otherwise (no admin). */
export const DEFAULT_CAPABILITIES = [
  "agent-session.attach.v1",
  "agent-session.structured.hold.v1",
  "agent-session.close.v1",
  "agent-session.turns.v1",
  "agent-session.items.v1",
  "agent-session.approvals.v2",
];

export interface ReconnectOptions {
  /** First retry delay (default 50 ms); doubles up to maxDelayMs. */
  initialDelayMs?: number;
  /** Longest delay between attempts (default 2000 ms). */
  maxDelayMs?: number;
  /** Give up after this many failed attempts (default: never). */
  maxAttempts?: number;
}

export interface ClientOptions {
  /** Socket path; default resolved as the daemon does (resolveSocketPath). */
  socketPath?: string;
  client?: { name: string; version: string };
  capabilities?: string[];
  /** Default timeout of every call (default 30 s). */
  timeoutMs?: number;
  /** Reconnect with backoff when the connection drops (default on). */
  reconnect?: boolean | ReconnectOptions;
  /** Bytes (as read off the wire) of the events queued across
   * subscriptions before the socket is paused (default 16 MiB); the daemon
   * then lags the subscription and the client re-attaches from its cursor
   * when the consumer catches up. */
  highWaterMarkBytes?: number;
  /** The same bound counted in events (default 8192); whichever is
   * reached first pauses. */
  highWaterMark?: number;
}

export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

/** Methods a call may be re-sent for after a reconnect. */
const RETRY_SAFE = new Set<string>([
  "agentSession.get", "agentSession.list", "agentSession.read", "agentSession.hold",
  "agentSession.release", "agentSession.send", "agentSession.cancel", "agentSession.close",
  "daemon.status", "rpc.discover",
]);

type Params<M extends MethodName> = Methods[M]["params"];
type Result<M extends MethodName> = Methods[M]["result"];

/**
 * A sessiond client: typed calls, event streams, and reconnection that
 * re-initializes, re-holds every hold and re-attaches every stream from its
 * cursor. Events: "disconnected" (Error), "reconnected" (InitializeResult),
 * "holdLost" ({params, error}).
 */
export class SessiondClient extends EventEmitter implements SubscriptionOwner {
  readonly socketPath: string;
  private opts: ClientOptions;
  private link: Link | undefined;
  private connecting: Promise<Link> | undefined;
  private closedByUser = false;
  private initResult: InitializeResult | undefined;
  /** token: the current holdToken; given: the one hold() returned (a
   * reconnect re-holds with a new token the caller never saw). */
  private holds = new Map<string, { params: HoldParams; token: string; given: string; expires: number }>();
  private holdsPruned = 0; // size of the map after the last prune
  private subs = new Set<Subscription>();
  private bySubId = new Map<string, Subscription>();
  private totalQueued = 0;
  private totalBytes = 0;
  private paused = false;

  private constructor(opts: ClientOptions) {
    super();
    this.opts = opts;
    this.socketPath = resolveSocketPath(opts.socketPath);
  }

  /** Connects and initializes; rejects when no daemon answers. */
  static async connect(opts: ClientOptions = {}): Promise<SessiondClient> {
    const c = new SessiondClient(opts);
    c.link = await c.open();
    return c;
  }

  /** The last initialize result (server capabilities, connectionId). */
  get server(): InitializeResult {
    if (!this.initResult) throw new ClientClosedError();
    return this.initResult;
  }

  private get timeoutMs(): number {
    return this.opts.timeoutMs ?? 30_000;
  }

  private async open(): Promise<Link> {
    const link = await Link.open(this.socketPath, this.timeoutMs);
    link.onNotification("agentSession.event", (p: EventNotice) => this.onEvent(p));
    link.onNotification("agentSession.lagged", (p: LaggedNotice) => this.onLagged(link, p));
    const deadline = Date.now() + this.timeoutMs;
    try {
      this.initResult = await link.call<InitializeResult>("initialize", {
        protocolVersion: PROTOCOL_VERSION,
        client: this.opts.client ?? { name: "@sessiond/client", version: "0.1.0" },
        capabilities: this.opts.capabilities ?? DEFAULT_CAPABILITIES,
      }, deadline);
    } catch (e) {
      link.fail(e as Error);
      throw e;
    }
    link.onClose((err) => this.onLinkClosed(link, err));
    return link;
  }

  private onLinkClosed(link: Link, err: Error): void {
    if (this.link !== link) return;
    this.link = undefined;
    this.bySubId.clear();
    for (const s of this.subs) s.subscriptionId = undefined;
    this.paused = false;
    if (this.closedByUser) return;
    this.emit("disconnected", err);
    if (this.opts.reconnect === false) {
      for (const s of this.subs) s.fail(new ConnectionClosedError("agentSession.attach", err));
      return;
    }
    this.connecting = this.reconnect();
    this.connecting.catch(() => undefined);
  }

  private async reconnect(): Promise<Link> {
    const r = typeof this.opts.reconnect === "object" ? this.opts.reconnect : {};
    let delay = r.initialDelayMs ?? 50;
    for (let attempt = 1; ; attempt++) {
      await new Promise((res) => setTimeout(res, delay * (0.75 + Math.random() / 2)));
      if (this.closedByUser) throw new ClientClosedError();
      let link: Link | undefined;
      try {
        link = await this.open();
        // A restore that fails (not the daemon refusing one stream: the
        // connection) is a failed attempt like a failed connect: counted
        // against maxAttempts, and the delay keeps doubling.
        await this.restore(link);
      } catch (e) {
        link?.fail(e as Error);
        if (this.closedByUser) throw new ClientClosedError();
        if (r.maxAttempts !== undefined && attempt >= r.maxAttempts) {
          const err = new ConnectionClosedError("reconnect", e);
          for (const s of [...this.subs]) this.lose(s, err);
          this.connecting = undefined;
          if (this.listenerCount("error") > 0) this.emit("error", err);
          throw err;
        }
        delay = Math.min(delay * 2, r.maxDelayMs ?? 2000);
        continue;
      }
      this.link = link;
      this.connecting = undefined;
      this.emit("reconnected", this.initResult);
      return link;
    }
  }

  /** Ends sub with err and forgets it (it is not re-attached again). */
  private lose(sub: Subscription, err: Error): void {
    this.subs.delete(sub);
    if (sub.subscriptionId) this.bySubId.delete(sub.subscriptionId);
    sub.fail(err);
    this.recount();
  }

  /** Re-holds every hold (a new holdToken each) and re-attaches every
   * stream from its cursor, on a fresh link. */
  private async restore(link: Link): Promise<void> {
    const deadline = Date.now() + this.timeoutMs;
    for (const [key, h] of [...this.holds]) {
      if (h.expires <= Date.now()) {
        this.holds.delete(key); // its ttl ran out: the daemon dropped it
        continue;
      }
      try {
        // A ttl hold keeps what is left of its ttl, not a fresh one.
        const params = h.params.ttlMs ? { ...h.params, ttlMs: Math.max(1, Math.round(h.expires - Date.now())) } : h.params;
        const r = await link.call<HoldResult>("agentSession.hold", params, deadline);
        h.token = r.holdToken;
      } catch (e) {
        if (e instanceof SessiondError) {
          this.holds.delete(key);
          this.emit("holdLost", { params: h.params, error: e });
        } else throw e;
      }
    }
    for (const s of [...this.subs]) {
      if (s.isClosed) continue;
      try {
        await this.attachOn(link, s, deadline);
      } catch (e) {
        // The daemon refused this stream (its session was deleted while
        // it was down, say): that stream ends, the others carry on.
        if (e instanceof SessiondError) this.lose(s, new StreamLostError(s.sessionId, e));
        else throw e;
      }
    }
  }

  private async currentLink(method: string, deadline: number): Promise<Link> {
    if (this.closedByUser) throw new ClientClosedError();
    const cur = this.link;
    if (cur && !cur.closed) return cur;
    if (cur) await new Promise((r) => cur.onClose(r)); // closing: onLinkClosed starts the reconnect
    if (this.closedByUser) throw new ClientClosedError();
    if (!this.connecting) {
      // Reconnection gave up (maxAttempts): a new call tries again.
      if (this.opts.reconnect === false) throw new ConnectionClosedError(method);
      this.connecting = this.reconnect();
      this.connecting.catch(() => undefined);
    }
    const left = deadline - Date.now();
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        this.connecting,
        new Promise<never>((_, rej) => {
          timer = setTimeout(() => rej(new ConnectionClosedError(method)), Math.max(0, left));
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Any method by name, typed by the generated Methods map. */
  async call<M extends MethodName>(method: M, params: Params<M>, opts: CallOptions = {}): Promise<Result<M>> {
    const deadline = Date.now() + (opts.timeoutMs ?? this.timeoutMs);
    for (;;) {
      const link = await this.currentLink(method, deadline);
      try {
        return await link.call<Result<M>>(method, params, deadline, opts.signal);
      } catch (e) {
        if (e instanceof ConnectionClosedError && RETRY_SAFE.has(method) && this.opts.reconnect !== false && !this.closedByUser) {
          continue;
        }
        throw e;
      }
    }
  }

  // --- typed methods ---------------------------------------------------

  create(p: Params<"agentSession.create">, o?: CallOptions) { return this.call("agentSession.create", p, o); }
  list(o?: CallOptions) { return this.call("agentSession.list", {}, o); }
  get(sessionId: string, o?: CallOptions) { return this.call("agentSession.get", { sessionId }, o); }
  delete(sessionId: string, o?: CallOptions) { return this.call("agentSession.delete", { sessionId }, o); }
  closeSession(sessionId: string, o?: CallOptions) { return this.call("agentSession.close", { sessionId }, o); }
  read(p: Params<"agentSession.read">, o?: CallOptions) { return this.call("agentSession.read", p, o); }
  cancel(sessionId: string, o?: CallOptions) { return this.call("agentSession.cancel", { sessionId }, o); }
  respond(p: Params<"agentSession.respond">, o?: CallOptions) { return this.call("agentSession.respond", p, o); }
  status(o?: CallOptions) { return this.call("daemon.status", {}, o); }
  stats(o?: CallOptions) { return this.call("daemon.stats", {}, o); }
  shutdown(o?: CallOptions) { return this.call("daemon.shutdown", {}, o); }
  discover(o?: CallOptions) { return this.call("rpc.discover", {}, o); }

  /** Holds a session; the hold is re-taken after every reconnect. */
  async hold(p: HoldParams, o?: CallOptions): Promise<HoldResult> {
    // The ttl runs from before the call: this client never counts a hold
    // as alive after the daemon dropped it.
    const sent = Date.now();
    const r = await this.call("agentSession.hold", p, o);
    const expires = p.ttlMs ? sent + p.ttlMs : Infinity;
    this.holds.set(holdKey(p.sessionId, p.holderId), { params: { ...p }, token: r.holdToken, given: r.holdToken, expires });
    if (this.holds.size > 2 * this.holdsPruned + 64) this.pruneHolds();
    return r;
  }

  /** Forgets holds whose ttl ran out (the daemon dropped them). */
  private pruneHolds(): void {
    const now = Date.now();
    for (const [k, h] of this.holds) if (h.expires <= now) this.holds.delete(k);
    this.holdsPruned = this.holds.size;
  }

  /** Releases a hold with its current holdToken. The token hold()
   * returned still releases it after a reconnect re-held it under a new
   * one; an older token changes nothing (released: false), as on the
   * daemon. */
  async release(p: Params<"agentSession.release">, o?: CallOptions) {
    const key = holdKey(p.sessionId, p.holderId);
    const h = this.holds.get(key);
    const ours = h && (p.holdToken === undefined || p.holdToken === h.given || p.holdToken === h.token);
    if (ours) this.holds.delete(key);
    return this.call("agentSession.release", { ...p, holdToken: ours ? h.token : p.holdToken }, o);
  }

  /** How many holds this client keeps (and re-takes after a reconnect). */
  get heldCount(): number {
    this.pruneHolds();
    return this.holds.size;
  }

  /** The current holdToken of a hold this client took. */
  holdToken(sessionId: string, holderId: string): string | undefined {
    const h = this.holds.get(holdKey(sessionId, holderId));
    return h && h.expires > Date.now() ? h.token : undefined;
  }

  /** Sends a message with a clientMessageId (generated when absent), so
   * the retry after a reconnect is never a second turn. */
  send(p: Params<"agentSession.send">, o?: CallOptions) {
    return this.call("agentSession.send", { ...p, clientMessageId: p.clientMessageId ?? randomUUID() }, o);
  }

  /** Streams a session's events after afterSeq (default 0); the journal
   * before the attach is read in pages of pageLimit events (default 4096,
   * the daemon's maximum; pages are also cut at 1 MiB). */
  async attach(sessionId: string, opts: { afterSeq?: number; pageLimit?: number } & CallOptions = {}): Promise<Subscription> {
    const sub = new Subscription(this, sessionId, opts.afterSeq ?? 0);
    sub.pageLimit = opts.pageLimit ?? 4096;
    this.subs.add(sub);
    const deadline = Date.now() + (opts.timeoutMs ?? this.timeoutMs);
    for (;;) {
      const link = await this.currentLink("agentSession.attach", deadline);
      try {
        await this.attachOn(link, sub, deadline, opts.signal);
        return sub;
      } catch (e) {
        if (e instanceof ConnectionClosedError && this.opts.reconnect !== false) {
          if (sub.subscriptionId === undefined && !this.subs.has(sub)) throw e;
          // restore() re-attaches it on the next link.
          await this.currentLink("agentSession.attach", deadline);
          return sub;
        }
        this.subs.delete(sub);
        throw e;
      }
    }
  }

  /** Attaches sub on link from its cursor; the rest of the journal up to
   * the attach's lastSeq is read page by page as the consumer makes room,
   * live events waiting behind it. */
  private async attachOn(link: Link, sub: Subscription, deadline = Date.now() + this.timeoutMs, signal?: AbortSignal): Promise<void> {
    const gen = ++sub.generation;
    sub.holdLive();
    const r = await link.call<AttachResult>("agentSession.attach",
      { sessionId: sub.sessionId, afterSeq: sub.cursor, limit: sub.pageLimit }, deadline, signal);
    sub.subscriptionId = r.subscriptionId;
    this.bySubId.set(r.subscriptionId, sub);
    if (sub.isClosed) {
      this.detach(link, r.subscriptionId);
      return;
    }
    this.queuePage(sub, r, r.lastSeq);
    if (!r.hasMore || sub.cursor >= r.lastSeq || r.events.length === 0) return this.goLive(sub);
    void this.walk(link, sub, gen, r.lastSeq).catch((e: Error) => {
      if (!(e instanceof ConnectionClosedError) && sub.generation === gen) sub.fail(e);
    });
  }

  private async walk(link: Link, sub: Subscription, gen: number, lastSeq: number): Promise<void> {
    for (;;) {
      await sub.room(sub.pageLimit);
      if (sub.isClosed || sub.generation !== gen || link.closed) return;
      const next = await link.call<{ events: Event[]; hasMore: boolean }>("agentSession.read",
        { sessionId: sub.sessionId, afterSeq: sub.cursor, limit: sub.pageLimit }, Date.now() + this.timeoutMs);
      if (sub.generation !== gen) return;
      this.queuePage(sub, next, lastSeq);
      if (!next.hasMore || sub.cursor >= lastSeq || next.events.length === 0) return this.goLive(sub);
    }
  }

  private queuePage(sub: Subscription, page: { events: Event[] }, lastSeq: number): void {
    const { events } = page;
    const each = Math.ceil((messageBytes.get(page) ?? 0) / Math.max(1, events.length));
    for (const e of events) eventBytes.set(e, each);
    for (const e of events) if (e.seq <= lastSeq) this.queueEvent(sub, e);
  }

  private goLive(sub: Subscription): void {
    this.account(sub, () => sub.releaseLive());
    this.checkPressure();
  }

  private queueEvent(sub: Subscription, e: Event): void {
    this.account(sub, () => sub.push(e));
  }

  private onEvent(p: EventNotice): void {
    const sub = this.bySubId.get(p.subscriptionId);
    if (!sub) return;
    eventBytes.set(p.event, messageBytes.get(p) ?? 0);
    this.account(sub, () => sub.live(p.event));
    this.checkPressure();
  }

  /** The daemon dropped a slow subscription: re-attach from our cursor. */
  private onLagged(link: Link, p: LaggedNotice): void {
    const sub = this.bySubId.get(p.subscriptionId);
    if (!sub) return;
    this.bySubId.delete(p.subscriptionId);
    sub.subscriptionId = undefined;
    sub.reattaches++;
    this.attachOn(link, sub).catch((e: Error) => {
      if (!(e instanceof ConnectionClosedError)) sub.fail(e);
    });
  }

  /** Runs f, which queues events on sub, and counts what it queued. */
  private account(sub: Subscription, f: () => void): void {
    const n = sub.queued;
    const b = sub.queuedBytes;
    f();
    this.totalQueued += sub.queued - n;
    this.totalBytes += sub.queuedBytes - b;
  }

  private recount(): void {
    this.totalQueued = 0;
    this.totalBytes = 0;
    for (const s of this.subs) {
      this.totalQueued += s.queued;
      this.totalBytes += s.queuedBytes;
    }
  }

  private checkPressure(): void {
    const hwm = this.opts.highWaterMark ?? 8192;
    const hwmBytes = this.opts.highWaterMarkBytes ?? 16 << 20;
    if (!this.paused && (this.totalQueued > hwm || this.totalBytes > hwmBytes) && this.link) {
      this.paused = true;
      this.link.socket.pause();
    } else if (this.paused && this.totalQueued <= hwm / 2 && this.totalBytes <= hwmBytes / 2) {
      this.paused = false;
      this.link?.socket.resume();
    }
  }

  /** SubscriptionOwner: the consumer took an event. */
  drained(_sub: Subscription, bytes: number): void {
    this.totalQueued = Math.max(0, this.totalQueued - 1);
    this.totalBytes = Math.max(0, this.totalBytes - bytes);
    if (this.paused) this.checkPressure();
  }

  /** SubscriptionOwner: the consumer closed a stream. */
  closed(sub: Subscription): void {
    this.subs.delete(sub);
    if (sub.subscriptionId) {
      this.bySubId.delete(sub.subscriptionId);
      if (this.link) this.detach(this.link, sub.subscriptionId);
    }
    this.recount();
    this.checkPressure();
  }

  private detach(link: Link, subscriptionId: string): void {
    link.call("agentSession.detach", { subscriptionId }, Date.now() + this.timeoutMs).catch(() => undefined);
  }

  /** Closes the connection; holds then end through the daemon's backstop. */
  close(): void {
    this.closedByUser = true;
    const link = this.link;
    this.link = undefined; // no detach calls: the connection's end detaches all
    for (const s of [...this.subs]) s.close();
    link?.fail(new ClientClosedError());
    this.link = undefined;
  }
}

function holdKey(sessionId: string, holderId: string): string {
  return `${sessionId}\u0000${holderId}`;
}
