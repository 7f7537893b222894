import { randomUUID } from "node:crypto";
import { AbortError, ClientClosedError, ConnectionClosedError } from "./errors.js";

/** Methods a call may be re-sent for after a reconnect: only when the
 * connection was lost (ConnectionClosedError), never after a call that
 * failed on its own (InvalidParamsError, MessageTooLargeError …). */
export const RETRY_SAFE = new Set<string>([
  "agentSession.get", "agentSession.list", "agentSession.read", "agentSession.hold",
  "agentSession.release", "agentSession.send", "agentSession.cancel", "agentSession.close",
  "daemon.status", "rpc.discover",
]);

/** send's params with a clientMessageId (a new one when absent or empty):
 * a send retried after a reconnect is then answered duplicate, never a
 * second turn, whichever way it was called. */
export function withMessageId<P>(method: string, params: P): P {
  if (method !== "agentSession.send" || !params || typeof params !== "object") return params;
  const id = (params as { clientMessageId?: unknown }).clientMessageId;
  if (id !== undefined && id !== null && id !== "") return params;
  return { ...params, clientMessageId: randomUUID() };
}

/** Waits ms, or until closing aborts. */
export function sleep(ms: number, closing: AbortSignal): Promise<void> {
  return new Promise((res) => {
    const t = setTimeout(() => {
      closing.removeEventListener("abort", done);
      res();
    }, ms);
    const done = () => {
      clearTimeout(t);
      res();
    };
    if (closing.aborted) return done();
    closing.addEventListener("abort", done, { once: true });
  });
}

/** p, unless the deadline passes (ConnectionClosedError), the caller's
 * signal aborts (AbortError) or the client is closed (ClientClosedError)
 * first. */
export async function untilSettled<T>(p: Promise<T>, method: string, deadline: number, signal: AbortSignal | undefined, closing: AbortSignal): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let unlisten = (): void => undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, rej) => {
        const onAbort = () => rej(new AbortError(method, signal?.reason));
        const onClose = () => rej(new ClientClosedError());
        if (closing.aborted) return onClose();
        if (signal?.aborted) return onAbort();
        timer = setTimeout(() => rej(new ConnectionClosedError(method)), Math.max(0, deadline - Date.now()));
        signal?.addEventListener("abort", onAbort, { once: true });
        closing.addEventListener("abort", onClose, { once: true });
        unlisten = () => {
          signal?.removeEventListener("abort", onAbort);
          closing.removeEventListener("abort", onClose);
        };
      }),
    ]);
  } finally {
    clearTimeout(timer);
    unlisten();
  }
}
