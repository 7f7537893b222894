// A phone's side of the relay: JSON-RPC over a WebSocket.
import { WebSocket } from "ws";
import type { Event } from "../src/index.js";

export class RpcError extends Error {
  constructor(readonly code: number, message: string, readonly data: Record<string, unknown>) {
    super(message);
  }
}

export class Phone {
  private next = 1;
  private pending = new Map<number, { res: (v: unknown) => void; rej: (e: Error) => void }>();
  private events: Event[] = [];
  /** Notifications other than agentSession.event. */
  readonly notices: Array<{ method: string; params: Record<string, unknown> }> = [];
  private waiters: Array<() => void> = [];
  /** Resolves with the close code and reason once the socket closed. */
  closed: Promise<{ code: number; reason: string }>;

  private constructor(readonly ws: WebSocket) {
    this.closed = new Promise((res) => ws.on("close", (code, reason) => res({ code, reason: reason.toString() })));
    ws.on("message", (data) => {
      const m = JSON.parse(data.toString()) as { id?: number | null; result?: unknown; error?: { code: number; message: string; data: Record<string, unknown> }; method?: string; params?: { event: Event } };
      if (m.method === "agentSession.event") {
        this.events.push(m.params!.event);
        for (const w of this.waiters.splice(0)) w();
        return;
      }
      if (m.method) {
        this.notices.push({ method: m.method, params: m.params as unknown as Record<string, unknown> });
        for (const w of this.waiters.splice(0)) w();
        return;
      }
      const p = this.pending.get(m.id as number) ?? (m.id === null ? [...this.pending.values()][0] : undefined);
      if (!p) return;
      this.pending.delete(m.id as number);
      if (m.error) p.rej(new RpcError(m.error.code, m.error.message, m.error.data));
      else p.res(m.result);
    });
  }

  static connect(url: string, token: string | undefined, identity?: string): Promise<Phone> {
    const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };
    if (identity !== undefined) headers["x-sessiond-phone"] = identity;
    const ws = new WebSocket(url, { headers });
    return new Promise((resolve, reject) => {
      ws.once("open", () => resolve(new Phone(ws)));
      ws.once("unexpected-response", (_req, res) => {
        let body = "";
        res.on("data", (b: Buffer) => (body += b.toString()));
        res.on("end", () => reject(new Error(`HTTP ${res.statusCode} ${body}`)));
        res.on("error", () => reject(new Error(`HTTP ${res.statusCode}`)));
      });
      ws.once("error", reject);
    });
  }

  call<T = Record<string, unknown>>(method: string, params: unknown = {}): Promise<T> {
    const id = this.next++;
    this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    return new Promise((res, rej) => this.pending.set(id, { res: res as (v: unknown) => void, rej }));
  }

  /** Sends a raw frame and waits for the answer with id null. */
  raw(frame: string | Buffer): Promise<unknown> {
    this.ws.send(frame);
    return new Promise((res, rej) => this.pending.set(-1, { res, rej }));
  }

  /** Waits until an event matches and returns every event received so far. */
  async until(pred: (e: Event) => boolean): Promise<Event[]> {
    for (;;) {
      if (this.events.some(pred)) return this.events;
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }

  /** Waits for a notification (other than an event) named method. */
  async notice(method: string): Promise<Record<string, unknown>> {
    for (;;) {
      const n = this.notices.find((x) => x.method === method);
      if (n) return n.params;
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }

  get received(): Event[] {
    return this.events;
  }

  async drop(): Promise<void> {
    this.ws.terminate();
    await this.closed;
  }

  /** Stops reading the socket (the relay's output backs up) or resumes. */
  reading(on: boolean): void {
    const sock = (this.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    if (on) sock.resume();
    else sock.pause();
  }
}
