import type { Event } from "./generated/types.js";

/** Wire bytes of an event (its share of the page it came in). */
export const eventBytes = new WeakMap<Event, number>();

/** Key of a Subscription's state: the client's own (not exported by the
 * package), so no consumer can change a cursor or a bound. */
export const internal: unique symbol = Symbol("sessiond.subscription.state");

/** A Subscription's mutable state, kept by Streams. */
export interface SubState {
  subscriptionId: string | undefined;
  cursor: number;
  delivered: number;
  pageLimit: number;
  reattaches: number;
  /** Bumped on every (re-)attach; a page walk of an older one stops. */
  generation: number;
  /** Wait before the next re-attach after a lag. */
  lagDelayMs: number;
  /** cursor when the last lag re-attach was scheduled. */
  lagCursor: number;
  queuedBytes: number;
  heldBytes: number;
  highWaterMark: number;
  highWaterMarkBytes: number;
  paused: boolean;
  pauses: number;
}

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
  private queue: Event[] = [];
  private head = 0; // queue[head] is the next event (shift() is O(n))
  private roomWaiter: { n: number; wake: () => void } | undefined;
  /** Pending next() calls, settled in call order. */
  private waiters: Array<{ resolve: (r: IteratorResult<Event>) => void; reject: (e: Error) => void }> = [];
  private error: Error | undefined;
  private done = false;
  private owner: SubscriptionOwner;
  /** While a page walk runs, live events wait here. */
  private held: Event[] | undefined;

  /** The stream's state, the client's alone (Streams keeps it). */
  readonly [internal]: SubState;

  constructor(owner: SubscriptionOwner, sessionId: string, afterSeq: number) {
    this.owner = owner;
    this.sessionId = sessionId;
    this[internal] = { subscriptionId: undefined, cursor: afterSeq, delivered: afterSeq, pageLimit: 4096, reattaches: 0,
      generation: 0, lagDelayMs: 0, lagCursor: -1, queuedBytes: 0, heldBytes: 0, highWaterMark: 8192,
      highWaterMarkBytes: 16 << 20, paused: false, pauses: 0 };
  }

  /** The daemon's subscription id while attached. */
  get subscriptionId(): string | undefined { return this[internal].subscriptionId; }
  /** seq of the last event received (queued or delivered): the resume cursor. */
  get cursor(): number { return this[internal].cursor; }
  /** seq of the last event handed to the consumer. */
  get delivered(): number { return this[internal].delivered; }
  /** How many times the stream was re-attached (reconnect, lag, pause). */
  get reattaches(): number { return this[internal].reattaches; }
  /** Wire bytes of the queued events. */
  get queuedBytes(): number { return this[internal].queuedBytes; }
  /** This stream's bounds (attach() options). */
  get highWaterMark(): number { return this[internal].highWaterMark; }
  get highWaterMarkBytes(): number { return this[internal].highWaterMarkBytes; }
  /** True while paused at its high-water mark. */
  get paused(): boolean { return this[internal].paused; }
  /** How many times the stream was paused. */
  get pauses(): number { return this[internal].pauses; }

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
    return this.queued < n && this[internal].queuedBytes <= this[internal].highWaterMarkBytes / 2;
  }

  /** Events asked for per page: pageLimit, at most the high-water mark. */
  get pageSize(): number {
    return Math.max(1, Math.min(this[internal].pageLimit, this[internal].highWaterMark));
  }

  /** More is queued and held than the high-water mark allows. */
  get overHighWater(): boolean {
    const n = this.queued + (this.held?.length ?? 0);
    return n > this[internal].highWaterMark || this[internal].queuedBytes + this[internal].heldBytes > this[internal].highWaterMarkBytes;
  }

  /** The queue is down to half the high-water mark: a paused stream
   * resumes. */
  get belowLowWater(): boolean {
    return this.queued <= this[internal].highWaterMark / 2 && this[internal].queuedBytes <= this[internal].highWaterMarkBytes / 2;
  }

  /** Drops the held live events (the stream is paused: they are read
   * again from the journal when it resumes from its cursor). */
  dropHeld(): void {
    this.held = undefined;
    this[internal].heldBytes = 0;
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
      this[internal].heldBytes += eventBytes.get(e) ?? 0;
    } else this.push(e);
  }

  /** Queues e unless it was already received (seq <= cursor). */
  push(e: Event): void {
    if (this.done || e.seq <= this[internal].cursor) return;
    this[internal].cursor = e.seq;
    const w = this.waiters.shift();
    if (w) {
      this[internal].delivered = e.seq;
      w.resolve({ value: e, done: false });
      return;
    }
    this.queue.push(e);
    this[internal].queuedBytes += eventBytes.get(e) ?? 0;
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
    this[internal].queuedBytes = 0;
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
      this[internal].delivered = e.seq;
      const n = eventBytes.get(e) ?? 0;
      this[internal].queuedBytes -= n;
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
