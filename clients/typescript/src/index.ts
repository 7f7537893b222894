export { SessiondClient, DEFAULT_CAPABILITIES } from "./client.js";
export type { ClientOptions, CallOptions, LagRetryOptions, ReconnectOptions, ClientEvents, Disposable } from "./client.js";
export { Subscription } from "./subscription.js";
export { resolveSocketPath, resolveStateDir, socketDirProblem } from "./socket.js";
export { AbortError, BadAnswerError, ClientClosedError, ConnectionClosedError, DaemonUnavailableError, InvalidParamsError, MessageTooLargeError, SessiondError, StreamLostError, TimeoutError, UnsafeSocketError } from "./errors.js";
export * from "./generated/types.js";
export { ensureDaemon, daemonAnswers, packagedBinary, stopDaemon } from "./ensure.js";
export type { EnsureDaemonOptions, EnsureDaemonResult } from "./ensure.js";
export type { CommandTransport } from "./command.js";
