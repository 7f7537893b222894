import { createConnection } from "node:net";
import type { Duplex } from "node:stream";
import {
  createMessageConnection,
  ErrorCodes,
  ParameterStructures,
  ResponseError,
  AbstractMessageReader,
  Disposable,
  StreamMessageWriter,
  type DataCallback,
  type MessageReader,
  type Message,
  type MessageConnection,
  type MessageWriter,
} from "vscode-jsonrpc/node.js";
import { AbortError, BadAnswerError, ConnectionClosedError, InvalidParamsError, MessageTooLargeError, SessiondError, TimeoutError, UnsafeSocketError } from "./errors.js";

/** Bounds of one connection (see ClientOptions). */
export interface LinkLimits {
  maxMessageBytes: number;
  maxIncomingMessageBytes: number;
  maxParamsDepth: number;
}

export const DEFAULT_LINK_LIMITS: LinkLimits = {
  maxMessageBytes: 1 << 20,
  maxIncomingMessageBytes: 64 << 20,
  maxParamsDepth: 256,
};
import { socketDirProblem } from "./socket.js";

/** Bytes on the wire of a notification's params or a response's result
 * object (for the client's high-water mark, which counts bytes). */
export const messageBytes = new WeakMap<object, number>();

/** Longest header block a message may have before its body. */
const MAX_HEADER_BYTES = 8192;

/**
 * The daemon's Content-Length framing, read by a reader of our own on
 * vscode-jsonrpc's public AbstractMessageReader (no private field of its
 * StreamMessageReader is touched): a header naming more than max bytes
 * ends the link before the body is buffered (onTooLarge), each message's
 * wire size is noted (messageBytes), and nothing re-arms itself after the
 * link is gone (vscode's reader's partial-message timer did).
 */
export class SizedMessageReader extends AbstractMessageReader implements MessageReader {
  private chunks: Buffer[] = [];
  private size = 0;
  /** Body bytes of the message being read; -1 while reading its header. */
  private need = -1;
  private callback: DataCallback | undefined;
  private stopped = false;

  constructor(private socket: Duplex, private max: number, private onTooLarge: (bytes: number) => void) {
    super();
    socket.on("error", (e) => this.fireError(e));
    socket.on("close", () => this.fireClose());
  }

  listen(callback: DataCallback): Disposable {
    this.callback = callback;
    this.socket.on("data", this.onData);
    return Disposable.create(() => {
      this.callback = undefined;
      this.socket.off("data", this.onData);
    });
  }

  /** Stops reading for good (the link failed). */
  stop(): void {
    this.stopped = true;
    this.chunks = [];
    this.size = 0;
  }

  private take(n: number): Buffer {
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size);
    const out = all.subarray(0, n);
    const rest = all.subarray(n);
    this.chunks = rest.length ? [rest] : [];
    this.size = rest.length;
    return out;
  }

  private onData = (d: Buffer): void => {
    if (this.stopped) return;
    this.chunks.push(d);
    this.size += d.length;
    for (;;) {
      if (this.stopped) return;
      if (this.need < 0) {
        const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size);
        this.chunks = [all];
        const end = all.indexOf("\r\n\r\n");
        if (end < 0) {
          if (this.size > MAX_HEADER_BYTES) this.bad(`a header of over ${MAX_HEADER_BYTES} bytes`);
          return;
        }
        const header = all.subarray(0, end).toString("latin1");
        const m = /(?:^|\r\n)content-length:\s*(\d+)\s*(?:\r\n|$)/i.exec(header);
        if (!m) return this.bad(`a header without Content-Length: ${JSON.stringify(header.slice(0, 64))}`);
        const len = Number(m[1]);
        if (len > this.max) {
          this.stop();
          return this.onTooLarge(len);
        }
        this.take(end + 4);
        this.need = len;
      }
      if (this.size < this.need) return;
      const body = this.take(this.need);
      this.need = -1;
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(body.toString("utf8")) as Record<string, unknown>;
      } catch (e) {
        return this.bad(`a message that is not JSON (${(e as Error).message.slice(0, 80)})`);
      }
      const b = msg?.params ?? msg?.result;
      if (b && typeof b === "object") messageBytes.set(b, body.length);
      this.callback?.(msg as unknown as Message);
    }
  };

  private bad(what: string): void {
    this.stop();
    this.fireError(new Error(`the daemon sent ${what}`));
  }
}

/** One connection to the daemon: a socket (or a transport command's
 * stdio, command.ts) and its JSON-RPC framing. */
export class Link {
  readonly socket: Duplex;
  readonly conn: MessageConnection;
  private pending = new Set<(e: Error) => void>();
  private closedErr: Error | undefined;
  private closeHandlers: Array<(err: Error) => void> = [];
  private received = 0; // messages read off the socket
  private handled = 0; // of those, answers and notifications dispatched
  private closing = false;

  private constructor(socket: Duplex, private limits: LinkLimits) {
    this.socket = socket;
    const reader = new SizedMessageReader(socket, limits.maxIncomingMessageBytes,
      (bytes) => this.fail(new MessageTooLargeError("(incoming)", bytes, limits.maxIncomingMessageBytes, true)));
    const listen = reader.listen.bind(reader);
    reader.listen = (cb) => listen((msg) => {
      if (this.closedErr) return;
      this.received++;
      cb(msg);
    });
    this.conn = createMessageConnection(reader, safeWriter(new StreamMessageWriter(socket), (e) => this.fail(e)));
    // A frame the reader cannot parse (garbage) or a write that fails ends
    // the link: every pending call is rejected, nothing hangs.
    this.conn.onError(([err]) => this.fail(new Error(`protocol error: ${err?.message ?? err}`)));
    this.conn.onClose(() => void this.peerClosed(new Error("connection closed")));
    socket.on("close", () => void this.peerClosed(new Error("socket closed")));
    socket.on("error", (e) => void this.peerClosed(e));
    this.conn.listen();
  }

  /** Connects to path; rejects when nobody accepts there. */
  static open(path: string, timeoutMs: number, limits: LinkLimits = DEFAULT_LINK_LIMITS): Promise<Link> {
    return new Promise((resolve, reject) => {
      const problem = socketDirProblem(path);
      if (problem) return reject(new UnsafeSocketError(path, problem));
      const s = createConnection(path);
      const t = setTimeout(() => {
        s.destroy();
        reject(new TimeoutError("connect", timeoutMs));
      }, timeoutMs);
      s.once("error", (e) => {
        clearTimeout(t);
        reject(e);
      });
      s.once("connect", () => {
        clearTimeout(t);
        s.removeAllListeners("error");
        resolve(new Link(s, limits));
      });
    });
  }

  /** A link over a stream already connected to the daemon (a transport
   * command's stdio): destroying it ends the link, and its end is the
   * link's close. */
  static over(stream: Duplex, limits: LinkLimits = DEFAULT_LINK_LIMITS): Link {
    return new Link(stream, limits);
  }

  /** Registers a notification handler (counted, see peerClosed). */
  onNotification<P>(method: string, h: (p: P) => void): void {
    this.conn.onNotification(method, (p: P) => {
      this.handled++;
      h(p);
    });
  }

  /** The peer closed: vscode-jsonrpc dispatches one read message per
   * event-loop turn, so answers read before the close may not have been
   * dispatched yet; let them through before failing what is left. */
  private async peerClosed(err: Error): Promise<void> {
    if (this.closing || this.closedErr) return;
    this.closing = true;
    for (let i = 0; i < 10_000 && this.handled < this.received; i++) {
      await new Promise((r) => setImmediate(r));
    }
    this.fail(err);
  }

  get closed(): boolean {
    return this.closedErr !== undefined || this.closing;
  }

  onClose(h: (err: Error) => void): void {
    if (this.closedErr) h(this.closedErr);
    else this.closeHandlers.push(h);
  }

  /** Ends the link (idempotent); pending calls get ConnectionClosedError. */
  fail(err: Error): void {
    if (this.closedErr) return;
    this.closedErr = err;
    for (const rej of this.pending) rej(err);
    this.pending.clear();
    this.socket.destroy();
    this.conn.dispose();
    for (const h of this.closeHandlers) h(err);
    this.closeHandlers = [];
  }

  /** Why params cannot be sent as method's request, or undefined. */
  private checkParams(method: string, p: unknown): Error | undefined {
    const { maxParamsDepth, maxMessageBytes } = this.limits;
    if (depthOver(p, maxParamsDepth)) return new InvalidParamsError(method, `nested deeper than ${maxParamsDepth} levels (maxParamsDepth)`);
    let body: string;
    try {
      body = JSON.stringify({ jsonrpc: "2.0", id: Number.MAX_SAFE_INTEGER, method, params: p });
    } catch (e) {
      return new InvalidParamsError(method, `not JSON-serialisable: ${String((e as Error)?.message ?? e).slice(0, 120)}`, e);
    }
    const bytes = Buffer.byteLength(body);
    if (bytes > maxMessageBytes) return new MessageTooLargeError(method, bytes, maxMessageBytes);
    return undefined;
  }

  /** One request; rejects with SessiondError, ConnectionClosedError,
   * TimeoutError or AbortError, never hangs past the deadline. onLate gets
   * a result that arrives after the call was given up (timeout, abort):
   * what it did on the daemon can then be undone. */
  call<R>(method: string, params: unknown, deadline: number, signal?: AbortSignal, onLate?: (r: R) => void): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      if (this.closedErr) return reject(new ConnectionClosedError(method, this.closedErr));
      if (signal?.aborted) return reject(new AbortError(method, signal.reason));
      if (deadline <= Date.now()) return reject(new TimeoutError(method, 0));
      const p = params === undefined ? {} : params;
      // Encoded first: params that cannot be sent fail this call alone,
      // before anything is written (the daemon would drop the connection).
      const bad = this.checkParams(method, p);
      if (bad) return reject(bad);
      let timer: NodeJS.Timeout | undefined;
      let settled = false;
      const done = () => {
        settled = true;
        this.pending.delete(onClose);
        if (timer) clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      const onClose = (e: Error) => {
        done();
        reject(new ConnectionClosedError(method, e));
      };
      const onAbort = () => {
        done();
        reject(new AbortError(method, signal?.reason));
      };
      this.pending.add(onClose);
      signal?.addEventListener("abort", onAbort, { once: true });
      const left = deadline - Date.now();
      if (Number.isFinite(left)) {
        timer = setTimeout(() => {
          done();
          reject(new TimeoutError(method, Math.max(0, Math.round(left))));
        }, Math.max(0, left));
      }
      this.conn.sendRequest(method, ParameterStructures.byName, p).then(
        (r) => {
          this.handled++;
          if (settled) {
            if (onLate && r && typeof r === "object" && !Array.isArray(r)) onLate(r as R);
            return;
          }
          done();
          if (!r || typeof r !== "object" || Array.isArray(r)) reject(new BadAnswerError(method, r));
          else resolve(r as R);
        },
        (e: unknown) => {
          if (e instanceof ResponseError && e.code !== ErrorCodes.PendingResponseRejected) this.handled++;
          done();
          if (e instanceof ResponseError && e.code !== ErrorCodes.PendingResponseRejected) {
            reject(new SessiondError(method, e.code, e.message, e.data));
          } else {
            reject(new ConnectionClosedError(method, e));
          }
        },
      );
    });
  }
}

/** Deepest nesting of v (iterative: a 100k-deep value does not blow the
 * stack), stopping once past max. */
function depthOver(v: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[v, 1]];
  const seen = new Set<object>();
  while (stack.length) {
    const [x, d] = stack.pop()!;
    if (!x || typeof x !== "object" || seen.has(x)) continue;
    if (d > max) return true;
    seen.add(x);
    for (const c of Array.isArray(x) ? x : Object.values(x)) if (c && typeof c === "object") stack.push([c, d + 1]);
  }
  return false;
}

/** A writer whose write never rejects: vscode-jsonrpc rethrows a failed
 * request write from inside a promise executor (an unhandled rejection);
 * here a failed write ends the link instead, which rejects the call. */
function safeWriter(w: MessageWriter, onFail: (e: Error) => void): MessageWriter {
  return {
    onError: w.onError,
    onClose: w.onClose,
    end: () => w.end(),
    dispose: () => w.dispose(),
    write: (msg: Message) => w.write(msg).catch((e: unknown) => onFail(e instanceof Error ? e : new Error(String(e)))),
  };
}
