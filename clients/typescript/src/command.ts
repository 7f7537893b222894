import { spawn, type ChildProcess } from "node:child_process";
import { Duplex } from "node:stream";

/** A connection made by running a command whose stdin and stdout carry
 * the protocol: `["ssh", HOST, "sessiond", "proxy"]` reaches the daemon of
 * another machine (`sessiond proxy` copies its stdio to that daemon's
 * socket, starting the daemon if none runs). */
export interface CommandTransport {
  /** The program and its arguments (no shell). */
  command: string[];
  /** Its environment (default this process's). */
  env?: NodeJS.ProcessEnv;
}

/** How long the end of the command's output waits for its exit status. */
const EXIT_WAIT_MS = 1000;

/** Bytes of the command's stderr kept to explain its end. */
const STDERR_TAIL = 4096;

/**
 * The command's stdin and stdout as one duplex stream. Its output's end
 * (the command exited, ssh lost the connection, the proxy found no
 * daemon) ends the stream with an error naming the command, its exit and
 * the tail of its stderr, after every byte it wrote was read: to the
 * client it is a lost connection like a closed socket. Destroying the
 * stream (the client closing the link) ends the command's stdin and
 * kills it (SIGTERM).
 */
class CommandStream extends Duplex {
  private stderrTail = "";

  constructor(private child: ChildProcess, private name: string) {
    super();
    const out = child.stdout!;
    out.on("data", (d: Buffer) => {
      if (!this.push(d)) out.pause();
    });
    out.on("end", () => this.push(null));
    out.on("error", (e) => this.destroy(e));
    // Our readable side ends only once its consumer read everything; the
    // command's exit status (which explains the end) follows its output's
    // end closely, or it is not waited for past EXIT_WAIT_MS.
    this.on("end", () => {
      if (child.exitCode !== null || child.signalCode !== null) return this.destroy(this.ended());
      const t = setTimeout(() => this.destroy(this.ended()), EXIT_WAIT_MS);
      child.once("exit", () => {
        clearTimeout(t);
        this.destroy(this.ended());
      });
    });
    // A write to a command that exited fails (EPIPE) before its output's
    // end is read: that end, with the exit status, is what reports it.
    child.stdin!.on("error", () => undefined);
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (s: string) => {
      this.stderrTail = (this.stderrTail + s).slice(-STDERR_TAIL);
    });
    child.on("error", (e) => this.destroy(e));
  }

  private ended(): Error {
    const c = this.child;
    const how = c.exitCode !== null ? `exited ${c.exitCode}` : c.signalCode ? `was killed by ${c.signalCode}` : "closed its output";
    const tail = this.stderrTail.trim();
    return new Error(`transport command ${this.name} ${how}${tail ? `: ${tail}` : ""}`);
  }

  override _read(): void {
    this.child.stdout!.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void): void {
    this.child.stdin!.write(chunk, () => cb());
  }

  override _final(cb: (e?: Error | null) => void): void {
    this.child.stdin!.end(() => cb());
  }

  override _destroy(err: Error | null, cb: (e: Error | null) => void): void {
    const c = this.child;
    c.stdin!.destroy();
    c.stdout!.destroy();
    if (c.exitCode === null && c.signalCode === null) c.kill("SIGTERM");
    cb(err);
  }
}

/** Starts t's command; resolves with its stdio as a stream once it runs,
 * rejects when it cannot be started (ENOENT …). */
export function spawnCommand(t: CommandTransport): Promise<Duplex> {
  const [file, ...args] = t.command;
  if (!file) return Promise.reject(new TypeError("transport.command is empty"));
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ["pipe", "pipe", "pipe"], env: t.env ?? process.env });
    child.once("error", reject);
    child.once("spawn", () => {
      child.off("error", reject);
      resolve(new CommandStream(child, file));
    });
  });
}
