package acpagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/internal/rpc"
)

// startWait bounds the wait for a daemon this bridge started (the store's
// flock wait is 2 s; a cold start restores every session first).
const startWait = 30 * time.Second

// dialDaemon connects to the daemon at socket, starting `sessiond serve`
// (this binary, detached in its own session, with the flags the bridge was
// given and its environment) when nobody accepts there. Two bridges racing
// may both start one: the store's flock lets one serve, the other exits and
// both bridges connect to the winner.
func dialDaemon(ctx context.Context, f flags, o rpc.ClientOptions) (*rpc.Client, error) {
	if c, err := rpc.Dial(ctx, f.socket, o); err == nil {
		return c, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start the daemon: %w", err)
	}
	args := []string{"serve", "--socket", f.socket}
	if f.stateDir != "" {
		args = append(args, "--state-dir", f.stateDir)
	}
	if f.config != "" {
		args = append(args, "--config", f.config)
	}
	cmd := exec.Command(exe, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil { // stdio: /dev/null
		return nil, fmt.Errorf("start the daemon: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(startWait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := rpc.Dial(ctx, f.socket, o)
		if err == nil {
			return c, nil
		}
		var re *rpc.Error
		if errors.As(err, &re) {
			return nil, err // a daemon answered and refused
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the daemon started on %s did not accept within %s: %w", f.socket, startWait, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		case <-exited:
			exited = nil // lost the flock to another starter, or failed: keep dialling until the deadline
		}
	}
}
