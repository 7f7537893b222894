import { EventEmitter } from "node:events";
import { DEFAULT_LINK_LIMITS, Link } from "./link.js";
import { spawnCommand } from "./command.js";
import { Subscription, internal } from "./subscription.js";
import { Holds } from "./holds.js";
import { Streams } from "./streams.js";
import { resolveSocketPath } from "./socket.js";
import { ClientClosedError, ConnectionClosedError, DaemonUnavailableError } from "./errors.js";
import { RETRY_SAFE, sleep, untilSettled, withMessageId } from "./calls.js";
import { DEFAULT_CAPABILITIES, type CallOptions, type ClientOptions } from "./options.js";
import { ensureDaemon } from "./ensure.js";
import { PROTOCOL_VERSION, type AttentionNotice, type HoldParams, type HoldResult, type InitializeResult, type MethodName, type Methods } from "./generated/types.js";

export { DEFAULT_CAPABILITIES } from "./options.js";
export type { CallOptions, ClientOptions, LagRetryOptions, ReconnectOptions } from "./options.js";


/** What an on* registration returns: dispose() removes the handler
 * (as vscode-jsonrpc's Disposable; `using` works too). */
export interface Disposable {
  dispose(): void;
  [Symbol.dispose](): void;
}

/** The client's events and what each handler gets. */
export interface ClientEvents {
  disconnected: Error;
  reconnected: InitializeResult;
  reconnecting: { attempt: number; delayMs: number };
  holdLost: { params: HoldParams; error: Error };
  lagReattach: { sessionId: string; delayMs: number };
  streamPaused: { sessionId: string; queued: number; queuedBytes: number };
  daemonStarted: { logFile?: string };
  /** A daemon.attention notification (daemon.attention.v1): a session,
   * attached here or not, finished a turn, failed one or waits for an
   * approval. */
  attention: AttentionNotice;
  error: Error;
}

type Params<M extends MethodName> = Methods[M]["params"];
type Result<M extends MethodName> = Methods[M]["result"];

/** Nothing listens on the socket (no daemon): refused, or no socket. */
function noDaemon(e: unknown): boolean {
  for (let x = e as { code?: string; cause?: unknown } | undefined, i = 0; x && i < 5; x = x.cause as typeof x, i++) {
    if (x.code === "ECONNREFUSED" || x.code === "ENOENT") return true;
  }
  return false;
}

/**
 * A sessiond client: typed calls, event streams, and reconnection that
 * re-initializes, re-holds every hold and re-attaches every stream from its
 * cursor. Events: "disconnected" (Error), "reconnected" (InitializeResult),
 * "reconnecting" ({attempt, delayMs}), "holdLost" ({params, error}), "lagReattach" ({sessionId, delayMs}: a
 * lagged stream is re-attached after delayMs), "streamPaused" ({sessionId,
 * queued, queuedBytes}: a stream reached its high-water mark).
 */
export class SessiondClient extends EventEmitter {
  readonly socketPath: string;
  private opts: ClientOptions;
  private link: Link | undefined;
  private connecting: Promise<Link> | undefined;
  private closedByUser = false;
  /** Aborted by close(): ends waits for a reconnect at once. */
  private closing = new AbortController();
  private initResult: InitializeResult | undefined;
  /** Backoff of the reconnect cycle: the next wait (0: initialDelayMs)
   * and the attempts since the connection was last healthy. */
  private backoffMs = 0;
  private attempts = 0;
  private healthyTimer: NodeJS.Timeout | undefined;
  /** Since when reconnect attempts find no daemon (this cycle), what the
   * last one met, and whether unavailableMs has passed since: calls then
   * fail with DaemonUnavailableError instead of waiting. */
  private noDaemonSince: number | undefined;
  private noDaemonCause: unknown;
  private unavailable = false;
  private unavailableTimer: NodeJS.Timeout | undefined;
  private unavailableWaiters: Array<() => void> = [];
  private holds = new Holds();
  private streams: Streams;

  private constructor(opts: ClientOptions) {
    super();
    this.opts = opts;
    this.socketPath = resolveSocketPath(opts.socketPath);
    this.streams = new Streams({
      link: () => this.link,
      timeoutMs: () => this.timeoutMs,
      lagRetry: opts.lagRetry,
      onLagReattach: (sub, delayMs) => this.emit("lagReattach", { sessionId: sub.sessionId, delayMs }),
      onPause: (sub) => this.emit("streamPaused", { sessionId: sub.sessionId, queued: sub.queued, queuedBytes: sub[internal].queuedBytes }),
    });
  }

  /** Connects and initializes; rejects when no daemon answers. */
  static async connect(opts: ClientOptions = {}): Promise<SessiondClient> {
    const c = new SessiondClient(opts);
    if (opts.ensureDaemon && !opts.transport) await c.startDaemon();
    try {
      c.link = await c.open();
    } catch (e) {
      if (noDaemon(e) && !opts.transport) throw new DaemonUnavailableError("connect", c.socketPath, e);
      throw e;
    }
    return c;
  }

  /** ensureDaemon() on this client's socket (ClientOptions.ensureDaemon). */
  private async startDaemon(): Promise<void> {
    const e = typeof this.opts.ensureDaemon === "object" ? this.opts.ensureDaemon : {};
    const r = await ensureDaemon({ ...e, socketPath: e.socketPath ?? this.socketPath });
    if (r.started) this.emit("daemonStarted", { logFile: r.logFile });
  }

  /** Registers a handler of a client event, typed; dispose() removes it. */
  onEvent<K extends keyof ClientEvents>(name: K, h: (e: ClientEvents[K]) => void): Disposable {
    this.on(name, h);
    const dispose = () => void this.off(name, h);
    return { dispose, [Symbol.dispose]: dispose };
  }

  onDisconnected(h: (e: Error) => void): Disposable { return this.onEvent("disconnected", h); }
  onReconnected(h: (e: InitializeResult) => void): Disposable { return this.onEvent("reconnected", h); }
  onReconnecting(h: (e: ClientEvents["reconnecting"]) => void): Disposable { return this.onEvent("reconnecting", h); }
  onHoldLost(h: (e: ClientEvents["holdLost"]) => void): Disposable { return this.onEvent("holdLost", h); }
  onLagReattach(h: (e: ClientEvents["lagReattach"]) => void): Disposable { return this.onEvent("lagReattach", h); }
  onStreamPaused(h: (e: ClientEvents["streamPaused"]) => void): Disposable { return this.onEvent("streamPaused", h); }
  onDaemonStarted(h: (e: ClientEvents["daemonStarted"]) => void): Disposable { return this.onEvent("daemonStarted", h); }
  onAttention(h: (e: AttentionNotice) => void): Disposable { return this.onEvent("attention", h); }

  private resolveClosed!: () => void; // declared before closed: set by its initializer
  /** Resolves once close() was called and the connection is gone. */
  readonly closed: Promise<void> = new Promise<void>((res) => (this.resolveClosed = res));

  /** `await using client = await SessiondClient.connect()`: closed at the
   * end of the scope. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.close();
    await this.closed;
  }

  /** The capabilities this connection negotiated (client ∩ server, the
   * initialize result's negotiated), as opposed to server.capabilities:
   * all the server offers. */
  get negotiated(): readonly string[] {
    return this.server.negotiated;
  }

  /** Whether this connection negotiated capability. */
  has(capability: string): boolean {
    return this.server.negotiated.includes(capability);
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
    const o = this.opts;
    const limits = {
      maxMessageBytes: o.maxMessageBytes ?? DEFAULT_LINK_LIMITS.maxMessageBytes,
      maxIncomingMessageBytes: o.maxIncomingMessageBytes ?? DEFAULT_LINK_LIMITS.maxIncomingMessageBytes,
      maxParamsDepth: o.maxParamsDepth ?? DEFAULT_LINK_LIMITS.maxParamsDepth,
    };
    const link = o.transport ? Link.over(await spawnCommand(o.transport), limits) : await Link.open(this.socketPath, this.timeoutMs, limits);
    this.streams.listen(link);
    link.onNotification("daemon.attention", (p: AttentionNotice) => this.emit("attention", p));
    // close() ends a connection still being initialized too.
    const onClosing = () => link.fail(new ClientClosedError());
    this.closing.signal.addEventListener("abort", onClosing, { once: true });
    link.onClose(() => this.closing.signal.removeEventListener("abort", onClosing));
    if (this.closedByUser) onClosing();
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
    clearTimeout(this.healthyTimer);
    this.streams.linkClosed();
    if (this.closedByUser) return;
    this.emit("disconnected", err);
    if (this.opts.reconnect === false) {
      this.streams.failAll(new ConnectionClosedError("agentSession.attach", err));
      return;
    }
    this.connecting = this.reconnect();
    this.connecting.catch(() => undefined);
  }

  /** Reconnects with backoff: the wait doubles from initialDelayMs up to
   * maxDelayMs after every failed attempt, and after every reconnect the
   * connection drops again before it was healthy (healthyMs). Event
   * "reconnecting" ({attempt, delayMs}) before each wait. */
  private async reconnect(): Promise<Link> {
    const r = typeof this.opts.reconnect === "object" ? this.opts.reconnect : {};
    const initial = r.initialDelayMs ?? 50;
    const max = r.maxDelayMs ?? 2000;
    // An attempt that found no daemon: once one answers again, the
    // backoff starts over (the daemon is back, not flapping).
    let foundNone = false;
    for (;;) {
      const attempt = ++this.attempts;
      const delay = this.backoffMs || initial;
      this.backoffMs = Math.min(delay * 2, max);
      this.emit("reconnecting", { attempt, delayMs: delay });
      await sleep(delay * (0.75 + Math.random() / 2), this.closing.signal);
      if (this.closedByUser) throw new ClientClosedError();
      let link: Link | undefined;
      try {
        try {
          link = await this.open();
        } catch (e) {
          if (!noDaemon(e)) throw e;
          foundNone = true;
          // A client that keeps the daemon alive starts it instead: its
          // calls wait for that start (bounded by ensureDaemon's timeout).
          if (!this.opts.ensureDaemon || this.opts.transport) {
            this.foundNoDaemon(e);
            throw e;
          }
          await this.startDaemon();
          if (this.closedByUser) throw new ClientClosedError();
          link = await this.open();
        }
        // A restore that fails (not the daemon refusing one stream: the
        // connection) is a failed attempt like a failed connect: counted
        // against maxAttempts, and the delay keeps doubling.
        await this.restore(link);
        // close() while this attempt was under way: nothing is installed.
        if (this.closedByUser) throw new ClientClosedError();
      } catch (e) {
        link?.fail(e as Error);
        if (this.closedByUser) throw new ClientClosedError();
        if (r.maxAttempts !== undefined && attempt >= r.maxAttempts) {
          const err = new ConnectionClosedError("reconnect", e);
          this.streams.loseAll(err);
          this.connecting = undefined;
          this.resetBackoff(); // a later call starts a new cycle
          if (this.listenerCount("error") > 0) this.emit("error", err);
          throw err;
        }
        continue;
      }
      this.link = link;
      this.connecting = undefined;
      this.daemonBack();
      if (foundNone) this.resetBackoff();
      // The backoff carries on (doubled) should this connection drop
      // before it has been up for healthyMs.
      const armed = link;
      this.healthyTimer = setTimeout(() => {
        if (this.link === armed && !armed.closed) this.resetBackoff();
      }, r.healthyMs ?? 5000);
      this.healthyTimer.unref();
      this.emit("reconnected", this.initResult);
      return link;
    }
  }

  /** A reconnect attempt found no daemon: the first of a cycle starts the
   * unavailableMs clock of the calls waiting (README "Reconnection"). */
  private foundNoDaemon(e: unknown): void {
    this.noDaemonCause = e;
    if (this.noDaemonSince !== undefined) return;
    this.noDaemonSince = Date.now();
    const r = typeof this.opts.reconnect === "object" ? this.opts.reconnect : {};
    this.unavailableTimer = setTimeout(() => {
      this.unavailable = true;
      for (const w of this.unavailableWaiters.splice(0)) w();
    }, r.unavailableMs ?? 5000);
    this.unavailableTimer.unref();
  }

  /** A reconnect succeeded: calls wait for reconnects again. */
  private daemonBack(): void {
    clearTimeout(this.unavailableTimer);
    this.noDaemonSince = undefined;
    this.noDaemonCause = undefined;
    this.unavailable = false;
    this.unavailableWaiters.length = 0;
  }

  private unavailableError(method: string): DaemonUnavailableError {
    return new DaemonUnavailableError(method, this.socketPath, this.noDaemonCause,
      this.noDaemonSince === undefined ? undefined : Date.now() - this.noDaemonSince);
  }

  /** The wait for a reconnect, ended by DaemonUnavailableError once the
   * daemon has been found absent for unavailableMs. */
  private untilReconnected(method: string): Promise<Link> {
    const connecting = this.connecting!;
    if (this.unavailable) return Promise.reject(this.unavailableError(method));
    return new Promise<Link>((res, rej) => {
      const gone = () => rej(this.unavailableError(method));
      this.unavailableWaiters.push(gone);
      connecting.then(res, rej).finally(() => {
        const i = this.unavailableWaiters.indexOf(gone);
        if (i >= 0) this.unavailableWaiters.splice(i, 1);
      });
    });
  }

  private resetBackoff(): void {
    this.backoffMs = 0;
    this.attempts = 0;
  }

  /** Re-holds every hold (a new holdToken each) and re-attaches every
   * stream from its cursor, on a fresh link. */
  private async restore(link: Link): Promise<void> {
    const deadline = Date.now() + this.timeoutMs;
    await this.holds.restore(link, deadline, (params, error) => this.emit("holdLost", { params, error }));
    await this.streams.restore(link, deadline);
  }

  private async currentLink(method: string, deadline: number, signal?: AbortSignal): Promise<Link> {
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
    // The caller's signal and close() end the wait at once; a daemon found
    // absent for unavailableMs ends it with DaemonUnavailableError.
    return untilSettled(this.untilReconnected(method), method, deadline, signal, this.closing.signal);
  }

  /** Any method by name, typed by the generated Methods map. */
  async call<M extends MethodName>(method: M, params: Params<M>, opts: CallOptions = {}): Promise<Result<M>> {
    const deadline = Date.now() + (opts.timeoutMs ?? this.timeoutMs);
    params = withMessageId(method, params);
    for (;;) {
      const link = await this.currentLink(method, deadline, opts.signal);
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
    const sent = Date.now();
    const r = await this.call("agentSession.hold", p, o);
    this.holds.record(p, r, sent);
    return r;
  }

  /** Releases a hold with its current holdToken. The token hold()
   * returned still releases it after a reconnect re-held it under a new
   * one; an older token changes nothing (released: false), as on the
   * daemon. */
  async release(p: Params<"agentSession.release">, o?: CallOptions) {
    const holdToken = this.holds.releaseToken(p.sessionId, p.holderId, p.holdToken);
    return this.call("agentSession.release", { ...p, holdToken }, o);
  }

  /** How many holds this client keeps (and re-takes after a reconnect). */
  get heldCount(): number {
    return this.holds.count;
  }

  /** The current holdToken of a hold this client took. */
  holdToken(sessionId: string, holderId: string): string | undefined {
    return this.holds.token(sessionId, holderId);
  }

  /** Sends a message with a clientMessageId (generated when absent or
   * empty), so the retry after a reconnect is never a second turn. Within
   * one client an id must not be reused for another text: the daemon
   * answers the first turn (duplicate: true) and drops the text. */
  send(p: Params<"agentSession.send">, o?: CallOptions) {
    return this.call("agentSession.send", p, o);
  }

  /** Streams a session's events after afterSeq (default 0); the journal
   * before the attach is read in pages of pageLimit events (default 4096,
   * the daemon's maximum; pages are also cut at 1 MiB). highWaterMark and
   * highWaterMarkBytes bound this stream's queue (default: the client's).
   * An attach that fails, times out or is aborted leaves nothing
   * subscribed: a subscription whose answer comes too late is detached. */
  async attach(sessionId: string, opts: { afterSeq?: number; pageLimit?: number; highWaterMark?: number; highWaterMarkBytes?: number } & CallOptions = {}): Promise<Subscription> {
    const sub = new Subscription(this.streams, sessionId, opts.afterSeq ?? 0);
    sub[internal].pageLimit = opts.pageLimit ?? 4096;
    sub[internal].highWaterMark = opts.highWaterMark ?? this.opts.highWaterMark ?? sub[internal].highWaterMark;
    sub[internal].highWaterMarkBytes = opts.highWaterMarkBytes ?? this.opts.highWaterMarkBytes ?? sub[internal].highWaterMarkBytes;
    this.streams.add(sub);
    const deadline = Date.now() + (opts.timeoutMs ?? this.timeoutMs);
    try {
      const link = await this.currentLink("agentSession.attach", deadline, opts.signal);
      try {
        await this.streams.attachOn(link, sub, deadline, opts.signal);
      } catch (e) {
        if (!(e instanceof ConnectionClosedError) || this.opts.reconnect === false || !this.streams.has(sub)) throw e;
        // restore() re-attaches it on the next link.
        await this.currentLink("agentSession.attach", deadline, opts.signal);
      }
      return sub;
    } catch (e) {
      // Given up: the stream is closed, so neither a late answer nor a
      // reconnect's restore leaves it subscribed.
      sub.close();
      throw e;
    }
  }

  /** Closes the connection; holds then end through the daemon's backstop. */
  close(): void {
    this.closedByUser = true;
    this.closing.abort();
    clearTimeout(this.healthyTimer);
    clearTimeout(this.unavailableTimer);
    const link = this.link;
    this.link = undefined; // no detach calls: the connection's end detaches all
    this.streams.closeAll();
    link?.fail(new ClientClosedError());
    this.resolveClosed();
  }
}
