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

/** A stream could not be resumed after a reconnect (its session was
 * deleted while the daemon was down, say): the daemon's answer is the
 * cause; the stream's iterator rejects with this error, the rest of the
 * client keeps working. */
export class StreamLostError extends Error {
  readonly sessionId: string;
  /** data.reason of the daemon's answer (session_not_found …). */
  readonly reason: string;
  constructor(sessionId: string, cause: SessiondError) {
    super(`stream of session ${sessionId} could not be resumed after a reconnect: ${cause.message}`, { cause });
    this.name = "StreamLostError";
    this.sessionId = sessionId;
    this.reason = cause.reason;
  }
}

/** The socket's directory is not private (not a directory, owned by
 * another user, or open to group or others): the client does not connect,
 * as the daemon does not listen there. */
export class UnsafeSocketError extends Error {
  readonly socketPath: string;
  readonly problem: string;
  constructor(socketPath: string, problem: string) {
    super(`socket ${socketPath}: ${problem}; refusing to connect (the daemon only listens in a private directory)`);
    this.name = "UnsafeSocketError";
    this.socketPath = socketPath;
    this.problem = problem;
  }
}

/** A call's params cannot be sent (not JSON-serialisable: a BigInt, a
 * cycle; or nested deeper than the limit). Only that call fails: nothing
 * was written, the connection is untouched, and it is never retried. */
export class InvalidParamsError extends Error {
  readonly method: string;
  readonly reason = "invalid_params";
  constructor(method: string, problem: string, cause?: unknown) {
    super(`${method}: params cannot be sent: ${problem}`, { cause });
    this.name = "InvalidParamsError";
    this.method = method;
  }
}

/** A message over the size limit: an outgoing call whose encoded request
 * is larger than maxMessageBytes (only that call fails, nothing is
 * written, never retried), or an incoming message whose Content-Length
 * is over maxIncomingMessageBytes (the connection is dropped before the
 * body is read: every pending call gets ConnectionClosedError caused by
 * this error). */
export class MessageTooLargeError extends Error {
  readonly method: string;
  readonly reason = "message_too_large";
  readonly bytes: number;
  readonly limit: number;
  constructor(method: string, bytes: number, limit: number, incoming = false) {
    super(incoming
      ? `incoming message of ${bytes} bytes is over the client's limit of ${limit} (maxIncomingMessageBytes)`
      : `${method}: request of ${bytes} bytes is over the limit of ${limit} (maxMessageBytes, the daemon's max_message_bytes)`);
    this.name = "MessageTooLargeError";
    this.method = method;
    this.bytes = bytes;
    this.limit = limit;
  }
}

/** The daemon answered a call with a result that is not an object (every
 * method's result is one): the call fails with this error, the
 * connection carries on. */
export class BadAnswerError extends Error {
  readonly method: string;
  readonly reason = "bad_answer";
  constructor(method: string, result: unknown) {
    super(`${method}: the daemon's answer is not an object: ${JSON.stringify(result)?.slice(0, 64) ?? String(result)}`);
    this.name = "BadAnswerError";
    this.method = method;
  }
}

/** No daemon answers on the socket (refused, or no socket): the client's
 * own error, never on the wire (reason "daemon_unavailable"). connect()
 * throws it at once; a call made while the client reconnects waits for
 * the daemon up to reconnect.unavailableMs after a reconnect first found
 * none (default 5 s), then fails with it, and so does every call until a
 * reconnect succeeds. */
export class DaemonUnavailableError extends Error {
  readonly method: string;
  readonly reason = "daemon_unavailable";
  readonly socketPath: string;
  constructor(method: string, socketPath: string, cause?: unknown, downForMs?: number) {
    const why = (cause as NodeJS.ErrnoException | undefined)?.code ?? "not reachable";
    super(`${method}: no sessiond answers on ${socketPath} (${why}${downForMs !== undefined ? `, for ${downForMs} ms` : ""}); ` +
      "start it with `sessiond serve` (or connect with ensureDaemon: true)", { cause });
    this.name = "DaemonUnavailableError";
    this.method = method;
    this.socketPath = socketPath;
  }
}
