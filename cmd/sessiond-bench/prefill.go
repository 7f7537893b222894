package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/store"
)

// prefill writes sessions stored sessions of events events each into a
// fresh state dir, offline (before any daemon runs on it), through the same
// store and journal code the daemon uses, with fsync off for speed (one sync
// at the end). Each journal is session.created, turn.started, deltas of 64
// bytes, turn.completed: a closed turn, as a daemon leaves it.
func (b *bench) prefill(ctx context.Context, sessions, events int) (stateDir string, ids []string, err error) {
	stateDir = b.dir("state")
	st, err := store.Open(stateDir, 2*time.Second)
	if err != nil {
		return "", nil, err
	}
	defer st.Close()
	st.DB.NoSync = true
	j, err := journal.Open(st.DB, journal.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return "", nil, err
	}
	text := strings.Repeat("x", 64)
	for i := 0; i < sessions; i++ {
		id := fmt.Sprintf("bench_%08d", i)
		if err := st.PutRecord(store.Record{ID: id, Provider: "echo", Cwd: b.root, Title: "bench", CreatedAt: time.Now().UTC()}); err != nil {
			j.Close()
			return "", nil, err
		}
		turn := "t_bench"
		ds := make([]event.Draft, 0, events)
		ds = append(ds, event.New(event.SessionCreated, "", nil),
			event.New(event.TurnStarted, turn, event.TurnStartedData{TurnID: turn, Text: "bench"}))
		for len(ds) < events-1 {
			ds = append(ds, event.New(event.MessageDelta, turn, event.DeltaData{Text: text}))
		}
		ds = append(ds, event.New(event.TurnCompleted, turn, event.TurnCompletedData{Status: event.StatusCompleted}))
		for len(ds) > 0 {
			k := min(len(ds), 1000)
			if _, err := j.Append(ctx, id, ds[:k]...); err != nil {
				j.Close()
				return "", nil, fmt.Errorf("prefill %s: %w", id, err)
			}
			ds = ds[k:]
		}
		ids = append(ids, id)
	}
	if err := j.Close(); err != nil {
		return "", nil, err
	}
	st.DB.NoSync = false
	if err := st.DB.Sync(); err != nil {
		return "", nil, err
	}
	return stateDir, ids, nil
}
