/** Capabilities a client asks for unless told otherwise (no admin). */
export const DEFAULT_CAPABILITIES = [
  "agent-session.attach.v1",
  "agent-session.structured.hold.v1",
  "agent-session.close.v1",
  "agent-session.turns.v1",
  "agent-session.items.v1",
  "agent-session.approvals.v2",
  "daemon.attention.v1",
];

export interface ReconnectOptions {
  /** First retry delay (default 50 ms); doubles up to maxDelayMs. */
  initialDelayMs?: number;
  /** Longest delay between attempts (default 2000 ms). */
  maxDelayMs?: number;
  /** Give up after this many failed attempts since the connection was
   * last healthy (default: never). */
  maxAttempts?: number;
  /** A reconnected connection (initialized, holds and streams restored)
   * that stays up this long is healthy: only then does the backoff start
   * again from initialDelayMs (default 5000 ms). One that drops sooner
   * counts as a failed attempt, so a daemon that accepts and then drops
   * every connection is retried ever more slowly, not at once. */
  healthyMs?: number;
  /** A call made while the client reconnects waits for the daemon; once
   * a reconnect attempt found none on the socket (refused, no socket), it
   * waits at most this long from then (default 5000 ms), then fails with
   * DaemonUnavailableError, as every call does at once until a reconnect
   * succeeds (the client keeps trying). */
  unavailableMs?: number;
}

export interface LagRetryOptions {
  /** Wait before re-attaching a stream the daemon lagged again right
   * after a re-attach that brought no event (default 50 ms); doubles up
   * to maxDelayMs, back to none after a re-attach that brought events. */
  initialDelayMs?: number;
  /** Longest such wait (default 2000 ms). */
  maxDelayMs?: number;
}

export interface ClientOptions {
  /** Socket path; default resolved as the daemon does (resolveSocketPath). */
  socketPath?: string;
  /** Connect by running a command instead of through the socket:
   * `{command: ["ssh", HOST, "sessiond", "proxy"]}` drives the daemon of
   * another machine. Every connection, reconnects included, runs the
   * command again; its exit is a lost connection (reconnect as usual);
   * close() kills it. socketPath and ensureDaemon are then unused (the
   * proxy starts its daemon if none runs). */
  transport?: import("./command.js").CommandTransport;
  /** Keep the daemon alive: connect() runs ensureDaemon() first, and
   * whenever a reconnect finds no daemon on the socket (refused, no
   * socket) it is started again before the next attempt (event
   * "daemonStarted" {pid, logFile} when this client's start is the one
   * that answers). Clients in many processes may all do so: the daemon's
   * store lock lets one daemon run, the others' starts exit. true: the
   * defaults (the packaged binary, the socket above); an object: the
   * options of ensureDaemon (its socketPath defaults to this one). */
  ensureDaemon?: boolean | import("./ensure.js").EnsureDaemonOptions;
  client?: { name: string; version: string; device?: string };
  capabilities?: string[];
  /** Default timeout of every call (default 30 s). */
  timeoutMs?: number;
  /** Reconnect with backoff when the connection drops (default on). */
  reconnect?: boolean | ReconnectOptions;
  /** Bytes (as read off the wire) of the events one stream may queue
   * for its consumer (default 16 MiB): past it that stream alone is paused
   * (event "streamPaused"), its daemon subscription detached, and it
   * re-attaches from its cursor once its consumer has read the queue down
   * to half. Other streams and calls never wait for it; the socket is
   * always read. attach() takes its own. */
  highWaterMarkBytes?: number;
  /** The same bound counted in events (default 8192); whichever is
   * reached first pauses the stream. */
  highWaterMark?: number;
  /** Largest request a call may send, in bytes as encoded (default
   * 1 MiB, the daemon's default max_message_bytes; set it to the daemon's
   * when configured otherwise): a larger one fails that call alone with
   * MessageTooLargeError, nothing is written and it is not retried. */
  maxMessageBytes?: number;
  /** Largest message accepted from the daemon (default 64 MiB; the
   * daemon's pages are cut at 1 MiB, one event can be larger): a header
   * naming more ends the connection before the body is read, pending calls
   * get ConnectionClosedError caused by MessageTooLargeError, and the
   * client reconnects. */
  maxIncomingMessageBytes?: number;
  /** Deepest nesting of a call's params (default 256): deeper fails that
   * call alone with InvalidParamsError. */
  maxParamsDepth?: number;
  /** Backoff of the re-attach after agentSession.lagged. */
  lagRetry?: LagRetryOptions;
}

export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}
