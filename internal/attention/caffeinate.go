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
// process runs, and -w ends it when the daemon's process does. Not
// verified at runtime here (the project's machines are Linux).
type Caffeinate struct{}

// Name implements Inhibitor.
func (Caffeinate) Name() string { return "caffeinate" }

// Probe looks caffeinate up on PATH.
func (Caffeinate) Probe(context.Context) error {
	if _, err := exec.LookPath("caffeinate"); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// Inhibit starts caffeinate; closing the result stops it.
func (Caffeinate) Inhibit(_ context.Context, _ string) (io.Closer, error) {
	cmd := exec.Command("caffeinate", "-i", "-w", strconv.Itoa(os.Getpid()))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: caffeinate: %w", ErrUnavailable, err)
	}
	return caffeinated{cmd}, nil
}

type caffeinated struct{ cmd *exec.Cmd }

func (c caffeinated) Close() error {
	c.cmd.Process.Kill()
	c.cmd.Wait()
	return nil
}
