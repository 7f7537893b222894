import { dirname, join, resolve } from "node:path";
import { lstatSync } from "node:fs";
import { homedir } from "node:os";

/**
 * The daemon's socket path, resolved exactly as `sessiond serve` does on
 * platform (default this one): the explicit path, $SESSIOND_SOCKET,
 * $XDG_RUNTIME_DIR/sessiond/sessiond.sock, on macOS (darwin)
 * $TMPDIR/sessiond/sessiond.sock, then /tmp/sessiond-$UID/sessiond.sock.
 */
export function resolveSocketPath(explicit?: string, env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform): string {
  if (explicit) return explicit;
  if (env.SESSIOND_SOCKET) return env.SESSIOND_SOCKET;
  if (env.XDG_RUNTIME_DIR) return join(env.XDG_RUNTIME_DIR, "sessiond", "sessiond.sock");
  if (platform === "darwin" && env.TMPDIR) return join(env.TMPDIR, "sessiond", "sessiond.sock");
  const uid = typeof process.getuid === "function" ? process.getuid() : 0;
  return `/tmp/sessiond-${uid}/sessiond.sock`;
}

/**
 * The daemon's state directory, resolved as `sessiond serve` does on
 * platform (default this one): the explicit path, $SESSIOND_STATE_DIR,
 * $XDG_STATE_HOME/sessiond, then ~/Library/Application Support/sessiond on
 * macOS (darwin) and ~/.local/state/sessiond elsewhere.
 */
export function resolveStateDir(explicit?: string, env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform): string {
  if (explicit) return resolve(explicit);
  if (env.SESSIOND_STATE_DIR) return resolve(env.SESSIOND_STATE_DIR);
  if (env.XDG_STATE_HOME) return resolve(env.XDG_STATE_HOME, "sessiond");
  const home = env.HOME || homedir();
  if (platform === "darwin") return resolve(home, "Library", "Application Support", "sessiond");
  return resolve(home, ".local", "state", "sessiond");
}

/**
 * What makes the socket's directory unsafe to connect through, as the
 * daemon checks it before it listens there: not a directory (a symlink
 * included), owned by another user, or open to group or others.
 * undefined when it is private or does not exist (nobody listens then).
 */
export function socketDirProblem(socketPath: string): string | undefined {
  const dir = dirname(socketPath);
  let st;
  try {
    st = lstatSync(dir);
  } catch {
    return undefined;
  }
  const euid = typeof process.geteuid === "function" ? process.geteuid() : st.uid;
  if (!st.isDirectory()) return `directory ${dir} is not a directory`;
  if (st.uid !== euid) return `directory ${dir} is owned by uid ${st.uid}, not ${euid}`;
  if ((st.mode & 0o077) !== 0) return `directory ${dir} has mode ${(st.mode & 0o777).toString(8).padStart(4, "0")}, open to group or others`;
  return undefined;
}
