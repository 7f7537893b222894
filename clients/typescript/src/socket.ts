import { join, resolve } from "node:path";
import { homedir } from "node:os";

/**
 * The daemon's socket path, resolved exactly as `sessiond serve` does: the
 * explicit path, $SESSIOND_SOCKET, $XDG_RUNTIME_DIR/sessiond/sessiond.sock,
 * /tmp/sessiond-$UID/sessiond.sock.
 */
export function resolveSocketPath(explicit?: string, env: NodeJS.ProcessEnv = process.env): string {
  if (explicit) return explicit;
  if (env.SESSIOND_SOCKET) return env.SESSIOND_SOCKET;
  if (env.XDG_RUNTIME_DIR) return join(env.XDG_RUNTIME_DIR, "sessiond", "sessiond.sock");
  const uid = typeof process.getuid === "function" ? process.getuid() : 0;
  return `/tmp/sessiond-${uid}/sessiond.sock`;
}

/**
 * The daemon's state directory, resolved as `sessiond serve` does: the
 * explicit path, $SESSIOND_STATE_DIR, $XDG_STATE_HOME/sessiond,
 * ~/.local/state/sessiond.
 */
export function resolveStateDir(explicit?: string, env: NodeJS.ProcessEnv = process.env): string {
  if (explicit) return resolve(explicit);
  if (env.SESSIOND_STATE_DIR) return resolve(env.SESSIOND_STATE_DIR);
  if (env.XDG_STATE_HOME) return resolve(env.XDG_STATE_HOME, "sessiond");
  return join(env.HOME || homedir(), ".local", "state", "sessiond");
}
