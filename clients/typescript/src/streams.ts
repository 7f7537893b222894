import { Link, messageBytes } from "./link.js";
import { Subscription, eventBytes, type SubscriptionOwner } from "./subscription.js";
import { ConnectionClosedError, SessiondError, StreamLostError } from "./errors.js";
import type { AttachResult, Event, EventNotice, LaggedNotice } from "./generated/types.js";
import type { LagRetryOptions } from "./options.js";

/** What the streams need from their client. */
export interface StreamsHost {
  /** The current connection, if any. */
  link(): Link | undefined;
  /** The default call timeout. */
  timeoutMs(): number;
  highWaterMark?: number;
  highWaterMarkBytes?: number;
  lagRetry?: LagRetryOptions;
  /** A lagged stream is to be re-attached after delayMs. */
  onLagReattach?(sub: Subscription, delayMs: number): void;
}

/**
 * A client's event streams: attach and page walks, live events, lag
 * re-attach, re-attach after a reconnect, and backpressure (the socket is
 * paused while the consumers are behind).
 */
export class Streams implements SubscriptionOwner {
  private subs = new Set<Subscription>();
  private bySubId = new Map<string, Subscription>();
  private totalQueued = 0;
  private totalBytes = 0;
  private paused = false;
  private lagTimers = new Map<Subscription, NodeJS.Timeout>();

  constructor(private host: StreamsHost) {}

  /** Wires the stream notifications of a new link. */
  listen(link: Link): void {
    link.onNotification("agentSession.event", (p: EventNotice) => this.onEvent(p));
    link.onNotification("agentSession.lagged", (p: LaggedNotice) => this.onLagged(link, p));
  }

  /** A new stream (attached by attachOn). */
  add(sub: Subscription): void {
    this.subs.add(sub);
  }

  has(sub: Subscription): boolean {
    return this.subs.has(sub);
  }

  /** Forgets a stream whose first attach failed. */
  forget(sub: Subscription): void {
    this.subs.delete(sub);
  }

  /** The connection closed: every stream is detached (re-attached by
   * restore on the next link). */
  linkClosed(): void {
    this.bySubId.clear();
    for (const s of this.subs) s.subscriptionId = undefined;
    this.paused = false;
  }

  /** Ends every stream with err. */
  failAll(err: Error): void {
    for (const s of this.subs) s.fail(err);
  }

  /** Ends every stream with err and forgets them. */
  loseAll(err: Error): void {
    for (const s of [...this.subs]) this.lose(s, err);
  }

  /** Closes every stream (the client is closing). */
  closeAll(): void {
    for (const s of [...this.subs]) s.close();
  }

  /** Ends sub with err and forgets it (it is not re-attached again). */
  private lose(sub: Subscription, err: Error): void {
    this.subs.delete(sub);
    this.clearLagTimer(sub);
    if (sub.subscriptionId) this.bySubId.delete(sub.subscriptionId);
    sub.fail(err);
    this.recount();
  }

  /** Re-attaches every stream from its cursor on a fresh link. */
  async restore(link: Link, deadline: number): Promise<void> {
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

  /** Attaches sub on link from its cursor; the rest of the journal up to
   * the attach's lastSeq is read page by page as the consumer makes room,
   * live events waiting behind it. */
  async attachOn(link: Link, sub: Subscription, deadline = Date.now() + this.host.timeoutMs(), signal?: AbortSignal): Promise<void> {
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
        { sessionId: sub.sessionId, afterSeq: sub.cursor, limit: sub.pageLimit }, Date.now() + this.host.timeoutMs());
      if (sub.generation !== gen) return;
      this.queuePage(sub, next, lastSeq);
      if (!next.hasMore || sub.cursor >= lastSeq || next.events.length === 0) return this.goLive(sub);
    }
  }

  private queuePage(sub: Subscription, page: { events: Event[] }, lastSeq: number): void {
    const { events } = page;
    const each = Math.ceil((messageBytes.get(page) ?? 0) / Math.max(1, events.length));
    for (const e of events) eventBytes.set(e, each);
    for (const e of events) if (e.seq <= lastSeq) this.account(sub, () => sub.push(e));
  }

  private goLive(sub: Subscription): void {
    this.account(sub, () => sub.releaseLive());
    this.checkPressure();
  }

  private onEvent(p: EventNotice): void {
    const sub = this.bySubId.get(p.subscriptionId);
    if (!sub) return;
    eventBytes.set(p.event, messageBytes.get(p) ?? 0);
    this.account(sub, () => sub.live(p.event));
    this.checkPressure();
  }

  /** The daemon dropped a slow subscription: re-attach from our cursor.
   * The first time at once; while the re-attaches bring no event (the
   * daemon lags the stream again and again) after a doubling delay,
   * lagRetry's initialDelayMs up to maxDelayMs; a re-attach that brought
   * events resets it. */
  private onLagged(link: Link, p: LaggedNotice): void {
    const sub = this.bySubId.get(p.subscriptionId);
    if (!sub) return;
    this.bySubId.delete(p.subscriptionId);
    sub.subscriptionId = undefined;
    sub.reattaches++;
    if (sub.cursor > sub.lagCursor) sub.lagDelayMs = 0;
    const delayMs = sub.lagDelayMs;
    const { initialDelayMs = 50, maxDelayMs = 2000 } = this.host.lagRetry ?? {};
    sub.lagDelayMs = Math.min(Math.max(delayMs * 2, initialDelayMs), maxDelayMs);
    sub.lagCursor = sub.cursor;
    this.host.onLagReattach?.(sub, delayMs);
    const gen = sub.generation;
    const reattach = () => {
      this.lagTimers.delete(sub);
      // Closed, or re-attached by a reconnect's restore meanwhile.
      if (sub.isClosed || link.closed || sub.generation !== gen || !this.subs.has(sub)) return;
      this.attachOn(link, sub).catch((e: Error) => {
        if (!(e instanceof ConnectionClosedError)) sub.fail(e);
      });
    };
    if (delayMs === 0) return reattach();
    this.lagTimers.set(sub, setTimeout(reattach, delayMs));
  }

  private clearLagTimer(sub: Subscription): void {
    clearTimeout(this.lagTimers.get(sub));
    this.lagTimers.delete(sub);
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
    const hwm = this.host.highWaterMark ?? 8192;
    const hwmBytes = this.host.highWaterMarkBytes ?? 16 << 20;
    const link = this.host.link();
    if (!this.paused && (this.totalQueued > hwm || this.totalBytes > hwmBytes) && link) {
      this.paused = true;
      link.socket.pause();
    } else if (this.paused && this.totalQueued <= hwm / 2 && this.totalBytes <= hwmBytes / 2) {
      this.paused = false;
      link?.socket.resume();
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
    this.clearLagTimer(sub);
    const link = this.host.link();
    if (sub.subscriptionId) {
      this.bySubId.delete(sub.subscriptionId);
      if (link) this.detach(link, sub.subscriptionId);
    }
    this.recount();
    this.checkPressure();
  }

  private detach(link: Link, subscriptionId: string): void {
    link.call("agentSession.detach", { subscriptionId }, Date.now() + this.host.timeoutMs()).catch(() => undefined);
  }
}
