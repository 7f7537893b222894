// Package echo is the built-in echo provider: a real child process that
// speaks the server side of the codex app-server stdio subset the adapter in
// internal/provider uses (newline-delimited JSON-RPC, no "jsonrpc" field),
// keeps its threads on disk so a later process can resume them, and answers
// every message with "echo: <text>" as a few deltas.
//
// Directives in a message's text make it misbehave on purpose, for tests and
// demos:
//
//	/sleep MS        wait MS ms before answering (interruptible)
//	/crash           exit 3 mid-turn after one delta
//	/approve         ask item/commandExecution/requestApproval first; on
//	                 "decline" the turn completes (status "completed") with
//	                 the single delta "declined" as its answer
//	/flood N [BYTES] answer with N deltas of BYTES bytes each (default 8)
//	/numbered        flood deltas are their own number, zero-padded to BYTES
//	/split FIFO      cut the flood's middle delta line in two: write the first
//	                 half, open FIFO and read it to its end, write the rest
//	/orphan          start a descendant in a new session, stdio on /dev/null,
//	                 that ignores SIGTERM and sleeps forever
//	/forget          delete this thread's file after the turn, so the next
//	                 thread/resume answers threadNotFound
//	/escape          start a descendant that escapes an inferred tree: an
//	                 intermediate in a new session (stdio on /dev/null, empty
//	                 env) starts it and exits; it ignores SIGTERM and sleeps
//	                 forever. The answer ends with " escaped=<pid>"
//	/cgmove MODE     the same descendant, then moved out of the provider's
//	                 cgroup: parent (the cgroup above, env scrubbed), root
//	                 (the cgroup2 root, env and session tags kept) or sub
//	                 (a new inner/ below it; it exits on SIGTERM). The
//	                 answer ends with " escaped=<pid>"
//	/hog N           start a process that allocates and touches N MiB (≤ 4096)
//	                 and sleeps. The answer ends with " hog=<pid>"
//	/ratelimit       end the turn failed as codex does when the account hit
//	                 its usage limit ($SESSIOND_ECHO_RATELIMIT: every turn)
//	/history         the answer ends with " history=N": the thread's
//	                 earlier turns, as its file in the home holds them
//	/forkbomb N      start a shell (new session, stdio on /dev/null, env
//	                 scrubbed) that starts N sleeping processes as fast as it
//	                 can, going on past refused forks (N ≤ 4096). The answer
//	                 ends with " forkbomb=<shell pid>"
//
// Flags: --home DIR (default $SESSIOND_ECHO_HOME, else
// $TMPDIR/sessiond-echo-<uid>), --ignore-sigterm, --ignore-eof,
// --exit-at-start, --slow-start MS.
package echo

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// HomeEnv names the environment variable holding the thread directory.
const HomeEnv = "SESSIOND_ECHO_HOME"

// orphanFlag is the hidden flag a /orphan descendant is started with.
const orphanFlag = "--orphan-child"

// Exit codes of Main.
const (
	exitOK      = 0
	exitUsage   = 2 // bad flags, --exit-at-start, unusable home
	exitCrashed = 3 // the /crash directive
)

type config struct {
	home          string
	ignoreSigterm bool
	ignoreEOF     bool
	exitAtStart   bool
	orphanChild   bool
	escapeStage   int
	cgmove        string
	hogMiB        int
	slowStart     int
}

// Main runs the echo provider on stdin/stdout until stdin ends and returns
// the process exit code. Diagnostics go to os.Stderr.
func Main(args []string, stdin io.Reader, stdout io.Writer) int {
	var cfg config
	fs := flag.NewFlagSet("provider echo", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.StringVar(&cfg.home, "home", "", "thread directory (default $"+HomeEnv+")")
	fs.BoolVar(&cfg.ignoreSigterm, "ignore-sigterm", false, "ignore SIGTERM")
	fs.BoolVar(&cfg.ignoreEOF, "ignore-eof", false, "keep running after stdin EOF")
	fs.BoolVar(&cfg.exitAtStart, "exit-at-start", false, "exit 2 immediately")
	fs.IntVar(&cfg.slowStart, "slow-start", 0, "sleep MS milliseconds before reading stdin")
	fs.BoolVar(&cfg.orphanChild, orphanFlag[2:], false, "internal: be a /orphan descendant")
	fs.IntVar(&cfg.escapeStage, escapeFlag[2:], 0, "internal: be a stage of an /escape descendant")
	fs.StringVar(&cfg.cgmove, cgmoveFlag[2:], "", "internal: move an /escape descendant's stage 2 to another cgroup (parent|root|sub)")
	fs.IntVar(&cfg.hogMiB, hogFlag[2:], 0, "internal: be a /hog process holding this many MiB")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if cfg.hogMiB > 0 {
		return hog(min(cfg.hogMiB, maxHogMiB))
	}
	if cfg.escapeStage > 0 {
		return escapeStage(cfg.escapeStage, cfg.cgmove)
	}
	if cfg.orphanChild {
		signal.Ignore(syscall.SIGTERM)
		sleepForever()
	}
	if cfg.ignoreSigterm {
		signal.Ignore(syscall.SIGTERM)
	}
	if cfg.ignoreEOF {
		// Outliving the daemon means writing to its closed stderr pipe:
		// an EPIPE, not Go's exit by SIGPIPE on fd 2.
		signal.Ignore(syscall.SIGPIPE)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("provider", "echo", "pid", os.Getpid())
	if cfg.exitAtStart {
		fmt.Fprintln(os.Stderr, "echo provider: exiting at start (--exit-at-start)")
		return exitUsage
	}
	if cfg.slowStart > 0 {
		time.Sleep(time.Duration(cfg.slowStart) * time.Millisecond)
	}
	home := resolveHome(cfg.home)
	if err := os.MkdirAll(home, 0o700); err != nil {
		fmt.Fprintf(os.Stderr, "echo provider: home %s: %v\n", home, err)
		return exitUsage
	}
	s := newServer(stdin, stdout, threadStore{dir: home}, log)
	code := s.run()
	if code != exitOK || !cfg.ignoreEOF {
		s.releaseWriterLocks() // as the process's exit would (Main also runs in-process in tests)
	}
	if code == exitOK && cfg.ignoreEOF {
		log.Info("stdin closed; staying up (--ignore-eof)")
		sleepForever()
	}
	return code
}

func resolveHome(flagHome string) string {
	if flagHome != "" {
		return flagHome
	}
	if h := os.Getenv(HomeEnv); h != "" {
		return h
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("sessiond-echo-%d", os.Getuid()))
}

// sleepForever blocks the process until a signal ends it.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}
