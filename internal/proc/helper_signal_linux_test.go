package proc

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func ignoreTerm() { signal.Ignore(syscall.SIGTERM) }

// notifyTerm survives SIGTERM and reports it on stderr.
func notifyTerm() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	go func() {
		for range ch {
			fmt.Fprintln(os.Stderr, "got SIGTERM")
		}
	}()
}
