// The real sessiond binary for the tests: built once with `go build` (or
// taken from $SESSIOND_BIN), started on a temp socket and state dir, ready
// when its log says "listening".
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync, existsSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const pkgRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const repoRoot = join(pkgRoot, "..", "..");

let built: string | undefined;

/** The daemon binary: $SESSIOND_BIN, or built into .bin/ by `go build`. */
export function sessiondBinary(): string {
  if (process.env.SESSIOND_BIN) return process.env.SESSIOND_BIN;
  if (built) return built;
  const out = join(pkgRoot, ".bin", "sessiond");
  mkdirSync(dirname(out), { recursive: true });
  execFileSync("go", ["build", "-o", out, "./cmd/sessiond"], { cwd: repoRoot, stdio: "inherit" });
  built = out;
  return out;
}

export class Daemon {
  readonly dir: string;
  readonly socket: string;
  readonly stateDir: string;
  readonly config: string;
  proc: ChildProcess | undefined;
  log = "";
  private exited: Promise<number | null> | undefined;

  constructor(config = "") {
    this.dir = mkdtempSync(join(tmpdir(), "sdts-"));
    this.socket = join(this.dir, "run", "s.sock");
    this.stateDir = join(this.dir, "state");
    this.config = join(this.dir, "config.toml");
    writeFileSync(this.config, config);
  }

  static async start(config = ""): Promise<Daemon> {
    const d = new Daemon(config);
    await d.start();
    return d;
  }

  /** Starts (or restarts) the daemon on the same state, on its socket
   * or on another one (where its clients do not find it). */
  start(socket = this.socket): Promise<void> {
    const p = spawn(sessiondBinary(), ["serve", "--socket", socket, "--state-dir", this.stateDir,
      "--config", this.config, "--log-format", "json", "--log-level", "debug"], { stdio: ["ignore", "ignore", "pipe"] });
    this.proc = p;
    this.exited = new Promise((res) => p.on("exit", (code) => res(code)));
    const from = this.log.length; // a restart waits for its own "listening"
    return new Promise((resolve, reject) => {
      let ready = false;
      p.stderr!.setEncoding("utf8");
      p.stderr!.on("data", (s: string) => {
        this.log += s;
        if (!ready && this.log.slice(from).includes('"msg":"listening"')) {
          ready = true;
          resolve();
        }
      });
      p.on("exit", (code) => {
        if (!ready) reject(new Error(`sessiond exited ${code} before listening:\n${this.log}`));
      });
    });
  }

  /** Kills the daemon with sig and waits for it to exit. */
  async kill(sig: NodeJS.Signals = "SIGKILL"): Promise<void> {
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill(sig);
    await this.exited;
  }

  /** Sends sig (SIGSTOP, SIGCONT …) without waiting for anything. */
  signal(sig: NodeJS.Signals): void {
    this.proc?.kill(sig);
  }

  /** Stops the daemon (SIGTERM: every session evicted) and removes its dirs. */
  async stop(): Promise<void> {
    await this.kill("SIGTERM");
    if (existsSync(this.dir)) rmSync(this.dir, { recursive: true, force: true });
  }
}
