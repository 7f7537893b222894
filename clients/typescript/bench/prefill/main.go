// Command prefill writes one stored echo session with a closed turn of N
// events into a fresh state dir, offline, through the daemon's own store
// and journal code (as cmd/sessiond-bench's replay does), for the
// TypeScript client's attach-replay benchmark. It prints the session id.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/store"
)

func main() {
	stateDir := flag.String("state-dir", "", "fresh state dir")
	events := flag.Int("events", 100000, "events in the journal")
	cwd := flag.String("cwd", "/", "the session's cwd")
	flag.Parse()
	if err := run(*stateDir, *events, *cwd); err != nil {
		fmt.Fprintln(os.Stderr, "prefill:", err)
		os.Exit(1)
	}
}

func run(stateDir string, events int, cwd string) error {
	st, err := store.Open(stateDir, 2*time.Second)
	if err != nil {
		return err
	}
	defer st.Close()
	st.DB.NoSync = true
	j, err := journal.Open(st.DB, journal.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	id := "bench_ts_0001"
	if err := st.PutRecord(store.Record{ID: id, Provider: "echo", Cwd: cwd, Title: "bench", CreatedAt: time.Now().UTC()}); err != nil {
		j.Close()
		return err
	}
	turn, text := "t_bench", strings.Repeat("x", 64)
	ds := []event.Draft{event.New(event.SessionCreated, "", nil),
		event.New(event.TurnStarted, turn, event.TurnStartedData{TurnID: turn, Text: "bench"})}
	for len(ds) < events-1 {
		ds = append(ds, event.New(event.MessageDelta, turn, event.DeltaData{Text: text}))
	}
	ds = append(ds, event.New(event.TurnCompleted, turn, event.TurnCompletedData{Status: event.StatusCompleted}))
	for len(ds) > 0 {
		k := min(len(ds), 1000)
		if _, err := j.Append(context.Background(), id, ds[:k]...); err != nil {
			j.Close()
			return fmt.Errorf("append: %w", err)
		}
		ds = ds[k:]
	}
	if err := j.Close(); err != nil {
		return err
	}
	st.DB.NoSync = false
	if err := st.DB.Sync(); err != nil {
		return err
	}
	fmt.Println(id)
	return nil
}
