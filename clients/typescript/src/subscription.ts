import type { Event } from "./generated/types.js";

/** Wire bytes of an event (its share of the page it came in). */
export const eventBytes = new WeakMap<Event, number>();

/** What a Subscription needs from its client. */
export interface SubscriptionOwner {
  /** Called when an event of bytes was taken out of the queue (backpressure). */
  drained(sub: Subscription, bytes: number): void;
  /** Called once when the subscription is closed by its consumer. */
  closed(sub: Subscription): void;
}

/**
 * One session's event stream: an async iterable of journal events in seq
 * order, with no gap and no duplicate, across reconnections and lag.
 * Breaking out of a `for await` closes it (the daemon subscription is
 * detached). Concurrent next() calls are queued and settled in order. A
 * consumer its high-water mark behind pauses this stream alone (see
 * Streams).
 */
export class Subscription implements AsyncIterable<Event> {
  readonly sessionId: string;
  /** The daemon's subscription id while attached. */
  subscriptionId: string | undefined;
  /** seq of the last event received (queued or delivered): the resume cursor. */
  cursor: number;
  /** seq of the last event handed to the consumer. */
  delivered: number;
  /** Events per attach/read page. */
  pageLimit = 4096;
  /** How many times the stream was re-attached (reconnect or lag). */
  reattaches = 0;
  /** Bumped on every (re-)attach; a page walk of an older one stops. */
  generation = 0;
  /** Wait before the next re-attach after a lag: 0 after a re-attach
   * that brought events, doubling while they bring none. */
  lagDelayMs = 0;
  /** cursor when the last lag re-attach was scheduled. */
  lagCursor = -1;
  private queue: Event[] = [];
  private head = 0; // queue[head] is the next event (shift() is O(n))
  /** Wire bytes of the queued events. */
  queuedBytes = 0;
  private roomWaiter: { n: number; wake: () => void } | undefined;
  /** Pending next() calls, settled in call order. */
  private waiters: Array<{ resolve: (r: IteratorResult<Event>) => void; reject: (e: Error) => void }> = [];
  private error: Error | undefined;
  private done = false;
  private owner: SubscriptionOwner;
  /** While a page walk runs, live events wait here. */
  private held: Event[] | undefined;
  /** Wire bytes of the held events. */
  heldBytes = 0;
  /** Queued (and held) events past which the stream is paused: its daemon
   * subscription detached until the consumer reads the queue down to half. */
  highWaterMark = 8192;
  /** The same bound in wire bytes. */
  highWaterMarkBytes = 16 << 20;
  /** True while paused (see highWaterMark). */
  paused = false;
  /** How many times the stream was paused. */
  pauses = 0;

  constructor(owner: SubscriptionOwner, sessionId: string, afterSeq: number) {
    this.owner = owner;
    this.sessionId = sessionId;
    this.cursor = afterSeq;
    this.delivered = afterSeq;
  }

  get queued(): number {
    return this.queue.length - this.head;
  }

  /** Resolves once fewer than n events, and at most half of
   * highWaterMarkBytes, are queued (or the stream ended): a page walk
   * then keeps at most half the byte bound plus one page in memory, however
   * large the events; an older wait is woken (its page walk was
   * superseded). */
  room(n: number): Promise<void> {
    if (this.hasRoom(n) || this.done || this.error) return Promise.resolve();
    this.roomWaiter?.wake();
    return new Promise((wake) => (this.roomWaiter = { n, wake }));
  }

  private hasRoom(n: number): boolean {
    return this.queued < n && this.queuedBytes <= this.highWaterMarkBytes / 2;
  }

  /** Events asked for per page: pageLimit, at most the high-water mark. */
  get pageSize(): number {
    return Math.max(1, Math.min(this.pageLimit, this.highWaterMark));
  }

  /** More is queued and held than the high-water mark allows. */
  get overHighWater(): boolean {
    const n = this.queued + (this.held?.length ?? 0);
    return n > this.highWaterMark || this.queuedBytes + this.heldBytes > this.highWaterMarkBytes;
  }

  /** The queue is down to half the high-water mark: a paused stream
   * resumes. */
  get belowLowWater(): boolean {
    return this.queued <= this.highWaterMark / 2 && this.queuedBytes <= this.highWaterMarkBytes / 2;
  }

  /** Drops the held live events (the stream is paused: they are read
   * again from the journal when it resumes from its cursor). */
  dropHeld(): void {
    this.held = undefined;
    this.heldBytes = 0;
  }

  get isClosed(): boolean {
    return this.done;
  }

  /** Starts holding live events back while pages are read. */
  holdLive(): void {
    this.held = this.held ?? [];
  }

  /** Releases the held live events (after the page walk). */
  releaseLive(): void {
    const h = this.held ?? [];
    this.dropHeld();
    for (const e of h) this.push(e);
  }

  /** A live notification. */
  live(e: Event): void {
    if (this.held) {
      this.held.push(e);
      this.heldBytes += eventBytes.get(e) ?? 0;
    } else this.push(e);
  }

  /** Queues e unless it was already received (seq <= cursor). */
  push(e: Event): void {
    if (this.done || e.seq <= this.cursor) return;
    this.cursor = e.seq;
    const w = this.waiters.shift();
    if (w) {
      this.delivered = e.seq;
      w.resolve({ value: e, done: false });
      return;
    }
    this.queue.push(e);
    this.queuedBytes += eventBytes.get(e) ?? 0;
  }

  /** Ends the stream with err (the consumer's next() rejects). */
  fail(err: Error): void {
    if (this.done) return;
    this.error = err;
    this.roomWaiter?.wake();
    for (const w of this.waiters.splice(0)) w.reject(err);
  }

  /** Closes the stream; pending next() resolves done. */
  close(): void {
    if (this.done) return;
    this.done = true;
    this.queue = [];
    this.head = 0;
    this.queuedBytes = 0;
    this.dropHeld();
    this.roomWaiter?.wake();
    for (const w of this.waiters.splice(0)) w.resolve({ value: undefined, done: true });
    this.owner.closed(this);
  }

  next(): Promise<IteratorResult<Event>> {
    const e = this.head < this.queue.length ? this.queue[this.head++] : undefined;
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    if (this.roomWaiter && this.hasRoom(this.roomWaiter.n)) {
      const w = this.roomWaiter;
      this.roomWaiter = undefined;
      w.wake();
    }
    if (e) {
      this.delivered = e.seq;
      const n = eventBytes.get(e) ?? 0;
      this.queuedBytes -= n;
      this.owner.drained(this, n);
      return Promise.resolve({ value: e, done: false });
    }
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    if (this.error) return Promise.reject(this.error);
    // Concurrent calls queue up: each gets the next event in turn.
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  [Symbol.asyncIterator](): AsyncIterator<Event> {
    return {
      next: () => this.next(),
      return: () => {
        this.close();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
