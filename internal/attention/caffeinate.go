package attention

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
)

// Caffeinate keeps a Mac awake with `caffeinate -i -w <daemon pid>` (no
// cgo: no IOPMAssertion): the assertion lasts while the caffeinate
// process runs. -w alone would outlive a live upgrade (exec keeps the
// pid), so caffeinate runs under a small sh that holds the read end of a
// pipe whose write end only the daemon has (close-on-exec): when the
// daemon closes it (release), exits, is SIGKILLed or execs, sh reads EOF,
// kills caffeinate and waits for it. Not verified at runtime on macOS
// here; the mechanism is tested on Linux with a stand-in caffeinate.
type Caffeinate struct {
	// Command is the caffeinate to run ("" : caffeinate on PATH).
	Command string
}

// Name implements Inhibitor.
func (Caffeinate) Name() string { return "caffeinate" }

func (c Caffeinate) command() string {
	if c.Command != "" {
		return c.Command
	}
	return "caffeinate"
}

// Probe looks caffeinate up.
func (c Caffeinate) Probe(context.Context) error {
	if _, err := exec.LookPath(c.command()); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// caffeinateScript runs caffeinate ($0) until its stdin ends.
const caffeinateScript = `"$0" -i -w "$1" </dev/null & c=$!; while read -r _; do :; done; kill "$c" 2>/dev/null; wait "$c"; exit 0`

// Inhibit starts caffeinate; closing the result stops it and waits.
func (c Caffeinate) Inhibit(_ context.Context, _ string) (io.Closer, error) {
	path, err := exec.LookPath(c.command())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	r, w, err := os.Pipe() // both close-on-exec in this process
	if err != nil {
		return nil, fmt.Errorf("%w: caffeinate: %w", ErrUnavailable, err)
	}
	cmd := exec.Command("/bin/sh", "-c", caffeinateScript, path, strconv.Itoa(os.Getpid()))
	cmd.Stdin = r // sh's stdin: a dup, the only read end left once r is closed
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("%w: caffeinate: %w", ErrUnavailable, err)
	}
	r.Close()
	return &caffeinated{cmd: cmd, w: w}, nil
}

type caffeinated struct {
	cmd *exec.Cmd
	w   *os.File
}

// Close ends the pipe: sh kills caffeinate, waits for it and exits.
func (c *caffeinated) Close() error {
	c.w.Close()
	return c.cmd.Wait()
}
