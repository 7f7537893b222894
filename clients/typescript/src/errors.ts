import type { ErrorReason } from "./generated/types.js";

/** An error the daemon answered: its JSON-RPC code and data.reason. */
export class SessiondError extends Error {
  readonly code: number;
  readonly reason: ErrorReason | string;
  readonly data: Record<string, unknown>;
  readonly method: string;
  constructor(method: string, code: number, message: string, data: unknown) {
    const d = data && typeof data === "object" ? (data as Record<string, unknown>) : {};
    const reason = typeof d.reason === "string" ? d.reason : "unknown";
    super(`${method}: ${message} (${code} ${reason})`);
    this.name = "SessiondError";
    this.code = code;
    this.reason = reason;
    this.data = d;
    this.method = method;
  }
}

/** The connection closed (or answered garbage) before the call was answered. */
export class ConnectionClosedError extends Error {
  readonly method: string;
  constructor(method: string, cause?: unknown) {
    super(`${method}: connection to sessiond closed before the answer`, { cause });
    this.name = "ConnectionClosedError";
    this.method = method;
  }
}

/** The call took longer than its timeout. */
export class TimeoutError extends Error {
  readonly method: string;
  constructor(method: string, ms: number) {
    super(`${method}: no answer within ${ms} ms`);
    this.name = "TimeoutError";
    this.method = method;
  }
}

/** The caller's AbortSignal fired. */
export class AbortError extends Error {
  constructor(method: string, reason?: unknown) {
    super(`${method}: aborted`, { cause: reason });
    this.name = "AbortError";
  }
}

/** The client was closed by its owner. */
export class ClientClosedError extends Error {
  constructor() {
    super("sessiond client closed");
    this.name = "ClientClosedError";
  }
}
