import { Link, messageBytes } from "./link.js";
import { Subscription, eventBytes, internal, type SubscriptionOwner } from "./subscription.js";
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
  /** A stream reached its high-water mark and was paused. */
  onPause?(sub: Subscription): void;
}

/**
 * A client's event streams: attach and page walks, live events, lag
 * re-attach, re-attach after a reconnect, and backpressure per stream: a
 * stream whose consumer is a high-water mark behind is paused alone (its
 * daemon subscription detached, nothing more queued for it) and resumes
 * from its cursor once the consumer read half of its queue. The socket is
 * never paused: one stalled consumer never holds back another stream or
 * any call's answer.
 */
export class Streams implements SubscriptionOwner {
  private subs = new Set<Subscription>();
  private bySubId = new Map<string, Subscription>();
  /** The link each stream's current daemon subscription lives on. */
  private attachedOn = new WeakMap<Subscription, Link>();
  /** The link restore() is re-attaching streams on (before it is the
   * client's link). */
  private restoring: Link | undefined;
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

  /** The connection closed: every stream is detached (re-attached by
   * restore on the next link). */
  linkClosed(): void {
    this.bySubId.clear();
    for (const s of this.subs) s[internal].subscriptionId = undefined;
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
    if (sub[internal].subscriptionId) this.bySubId.delete(sub[internal].subscriptionId);
    sub.fail(err);
  }

  /** Re-attaches every stream from its cursor on a fresh link. */
  async restore(link: Link, deadline: number): Promise<void> {
    this.restoring = link;
    try {
      for (const s of [...this.subs]) {
        // A paused stream re-attaches when its consumer makes room.
        if (s.isClosed || s[internal].paused) continue;
        try {
          s[internal].reattaches++;
          await this.attachOn(link, s, deadline);
        } catch (e) {
          // The daemon refused this stream (its session was deleted while
          // it was down, say): that stream ends, the others carry on.
          if (e instanceof SessiondError) this.lose(s, new StreamLostError(s.sessionId, e));
          else throw e;
        }
      }
    } finally {
      if (this.restoring === link) this.restoring = undefined;
    }
  }

  /** Attaches sub on link from its cursor; the rest of the journal up to
   * the attach's lastSeq is read page by page as the consumer makes room,
   * live events waiting behind it. */
  async attachOn(link: Link, sub: Subscription, deadline = Date.now() + this.host.timeoutMs(), signal?: AbortSignal): Promise<void> {
    const gen = ++sub[internal].generation;
    sub.holdLive();
    // An answer that arrives after the caller gave up (timeout, abort)
    // subscribed all the same: that subscription is detached at once.
    const r = await link.call<AttachResult>("agentSession.attach",
      { sessionId: sub.sessionId, afterSeq: sub[internal].cursor, limit: sub.pageSize }, deadline, signal,
      (late: AttachResult) => this.detach(link, late?.subscriptionId));
    // Closed, paused or re-attached meanwhile: this subscription is not
    // the stream's.
    if (sub.isClosed || sub[internal].paused || sub[internal].generation !== gen || link.closed) {
      this.detach(link, r.subscriptionId);
      return;
    }
    this.unsubscribe(sub);
    sub[internal].subscriptionId = r.subscriptionId;
    this.bySubId.set(r.subscriptionId, sub);
    this.attachedOn.set(sub, link);
    this.queuePage(sub, r, r.lastSeq);
    if (!r.hasMore || sub[internal].cursor >= r.lastSeq || r.events.length === 0) return this.goLive(sub);
    void this.walk(link, sub, gen, r.lastSeq).catch((e: Error) => {
      if (!(e instanceof ConnectionClosedError) && sub[internal].generation === gen) sub.fail(e);
    });
  }

  private async walk(link: Link, sub: Subscription, gen: number, lastSeq: number): Promise<void> {
    for (;;) {
      await sub.room(sub.pageSize);
      if (sub.isClosed || sub[internal].generation !== gen || link.closed) return;
      const next = await link.call<{ events: Event[]; hasMore: boolean }>("agentSession.read",
        { sessionId: sub.sessionId, afterSeq: sub[internal].cursor, limit: sub.pageSize }, Date.now() + this.host.timeoutMs());
      if (sub[internal].generation !== gen) return;
      this.queuePage(sub, next, lastSeq);
      if (!next.hasMore || sub[internal].cursor >= lastSeq || next.events.length === 0) return this.goLive(sub);
    }
  }

  private queuePage(sub: Subscription, page: { events: Event[] }, lastSeq: number): void {
    const { events } = page;
    const each = Math.ceil((messageBytes.get(page) ?? 0) / Math.max(1, events.length));
    for (const e of events) eventBytes.set(e, each);
    for (const e of events) if (e.seq <= lastSeq) sub.push(e);
  }

  private goLive(sub: Subscription): void {
    sub.releaseLive();
    if (sub.overHighWater) this.pause(sub);
  }

  private onEvent(p: EventNotice): void {
    const sub = this.bySubId.get(p.subscriptionId);
    if (!sub) return;
    eventBytes.set(p.event, messageBytes.get(p) ?? 0);
    sub.live(p.event);
    if (sub.overHighWater) this.pause(sub);
  }

  /** The stream's consumer is its high-water mark behind: its daemon
   * subscription is detached and what was held back dropped (read again
   * from the journal when it resumes from its cursor); the queue stays.
   * Nothing else waits for it. */
  private pause(sub: Subscription): void {
    if (sub[internal].paused || sub.isClosed) return;
    sub[internal].paused = true;
    sub[internal].pauses++;
    sub[internal].generation++; // a page walk or an attach under way stops
    sub.dropHeld();
    this.clearLagTimer(sub);
    this.unsubscribe(sub);
    this.host.onPause?.(sub);
    // Paused by held events alone: the queue is low already.
    if (sub.belowLowWater) queueMicrotask(() => this.resume(sub));
  }

  /** Re-attaches a paused stream from its cursor (on the current link,
   * or the one being restored; with none, the reconnect's restore does). */
  private resume(sub: Subscription): void {
    if (!sub[internal].paused) return;
    sub[internal].paused = false;
    sub[internal].reattaches++;
    const link = this.host.link() ?? this.restoring;
    if (!link || link.closed || sub.isClosed || !this.subs.has(sub)) return;
    this.attachOn(link, sub).catch((e: Error) => {
      if (!(e instanceof ConnectionClosedError)) sub.fail(e);
    });
  }

  /** Detaches sub's daemon subscription, if any. */
  private unsubscribe(sub: Subscription): void {
    const id = sub[internal].subscriptionId;
    if (!id) return;
    sub[internal].subscriptionId = undefined;
    this.bySubId.delete(id);
    const link = this.attachedOn.get(sub);
    this.attachedOn.delete(sub);
    if (link) this.detach(link, id);
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
    sub[internal].subscriptionId = undefined;
    sub[internal].reattaches++;
    if (sub[internal].cursor > sub[internal].lagCursor) sub[internal].lagDelayMs = 0;
    const delayMs = sub[internal].lagDelayMs;
    const { initialDelayMs = 50, maxDelayMs = 2000 } = this.host.lagRetry ?? {};
    sub[internal].lagDelayMs = Math.min(Math.max(delayMs * 2, initialDelayMs), maxDelayMs);
    sub[internal].lagCursor = sub[internal].cursor;
    this.host.onLagReattach?.(sub, delayMs);
    const gen = sub[internal].generation;
    const reattach = () => {
      this.lagTimers.delete(sub);
      // Closed, or re-attached by a reconnect's restore meanwhile.
      if (sub.isClosed || link.closed || sub[internal].generation !== gen || !this.subs.has(sub)) return;
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

  /** SubscriptionOwner: the consumer took an event. */
  drained(sub: Subscription): void {
    if (sub[internal].paused && sub.belowLowWater) this.resume(sub);
  }

  /** SubscriptionOwner: the consumer closed a stream. */
  closed(sub: Subscription): void {
    this.subs.delete(sub);
    this.clearLagTimer(sub);
    this.unsubscribe(sub);
  }

  private detach(link: Link, subscriptionId: string | undefined): void {
    if (typeof subscriptionId !== "string" || link.closed) return; // a closed connection detached it
    link.call("agentSession.detach", { subscriptionId }, Date.now() + this.host.timeoutMs()).catch(() => undefined);
  }
}
