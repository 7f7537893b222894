package codex

import (
	"context"
	"io"
	"time"
)

// Drain waits until the provider's stdout ends with everything emitted, or
// until it has been quiet for `quiet` (no bytes arrived and the reader is
// idle, measured from the later of the last byte and the call) — a
// surviving descendant may hold the pipe open. Then it stops reading:
// Out is closed when it is an io.Closer (at EOF too), and nothing is
// emitted after Drain returns. ctx bounds the wait; on ctx's end the adapter stops too.
func (a *Adapter) Drain(ctx context.Context, quiet time.Duration) error {
	if a.rt != nil {
		a.stop() // a thread of a shared runtime: the runtime drains the process
		return nil
	}
	if quiet <= 0 {
		quiet = DefaultDrainQuiet
	}
	err := a.out.WaitQuiet(ctx, a.done, quiet)
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
