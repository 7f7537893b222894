package provider

import (
	"context"
	"fmt"
	"io"
	"time"
)

// DefaultDrainQuiet is the quiet period the host uses after the root exited.
const DefaultDrainQuiet = 100 * time.Millisecond

// Drain waits until the provider's stdout ends with everything emitted, or
// until it has been quiet for `quiet` (no bytes arrived and the reader is
// idle, measured from the later of the last byte and the call) — a
// surviving descendant may hold the pipe open. Then it stops reading:
// Out is closed when it is an io.Closer (at EOF too), and nothing is
// emitted after Drain returns. ctx bounds the wait; on ctx's end the adapter stops too.
func (a *Adapter) Drain(ctx context.Context, quiet time.Duration) error {
	if quiet <= 0 {
		quiet = DefaultDrainQuiet
	}
	start := time.Now()
	t := time.NewTimer(quiet)
	defer t.Stop()
	var err error
wait:
	for {
		select {
		case <-a.done:
			a.stop()
			a.closeOut()
			return nil
		case <-ctx.Done():
			err = fmt.Errorf("provider: drain: %w", context.Cause(ctx))
			break wait
		case <-t.C:
			last := time.Unix(0, a.out.last.Load())
			if start.After(last) {
				last = start
			}
			idle := time.Since(last)
			if a.out.waiting.Load() && idle >= quiet {
				break wait
			}
			t.Reset(max(quiet-idle, quiet/10))
		}
	}
	a.stop()
	a.closeOut()
	return err
}

// closeOut closes Out when it is an io.Closer, whether or not the reader
// already saw its end: the descriptor is released now, not by the garbage
// collector.
func (a *Adapter) closeOut() {
	if c, ok := a.o.Out.(io.Closer); ok {
		_ = c.Close()
	}
}

// stop makes every later emit a no-op; in-flight Emit calls finish first.
func (a *Adapter) stop() {
	a.emitMu.Lock()
	a.stopped = true
	a.emitMu.Unlock()
}
