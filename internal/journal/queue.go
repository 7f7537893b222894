package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sessiond/sessiond/internal/event"
)

// request is one hand-in to the writer: drafts of one session (or a delete).
type request struct {
	id     string
	drafts []event.Draft
	del    bool
	probe  bool      // no rows: a try of the held rows now (unavailable.go)
	loss   *lossNote // a loss note: its rows are built by the writer
	sink   *Sink     // the sink it came from, told about a failure
	prev   *request  // the sink's previous request; cleared once committed

	taken bool // by the writer; guarded by Journal.qmu

	withdrawn bool // by its ctx before the writer took it; set before done closes

	// Set by the writer before done is closed.
	events []event.Event
	err    error
	done   chan struct{}
}

// lossNote is a loss to journal: count events that could not be stored.
type lossNote struct {
	count int
	cause string
}

// count is the number of events the request stands for.
func (r *request) count() int {
	if r.loss != nil {
		return r.loss.count
	}
	return len(r.drafts)
}

func newRequest(id string, ds []event.Draft) (*request, error) {
	if id == "" {
		return nil, fmt.Errorf("empty session id: %w", ErrBadDraft)
	}
	if len(id) > MaxSessionIDBytes {
		return nil, fmt.Errorf("session id %q is %d bytes, over the journal's limit of %d: %w",
			prefix(id), len(id), MaxSessionIDBytes, ErrBadDraft)
	}
	if len(ds) == 0 {
		return nil, nil
	}
	for i, d := range ds {
		if err := checkDraft(d); err != nil {
			return nil, fmt.Errorf("session %s: draft %d: %w", id, i, err)
		}
	}
	return &request{id: id, drafts: ds, done: make(chan struct{})}, nil
}

// checkDraft refuses a draft the writer could not store: no type, data
// that is not JSON, or a clientMessageId (a dedup index key) over
// MaxClientMessageIDBytes.
func checkDraft(d event.Draft) error {
	if d.Type == "" {
		return fmt.Errorf("no type: %w", ErrBadDraft)
	}
	if len(d.Data) > 0 && !json.Valid(d.Data) {
		return fmt.Errorf("%s: data is not JSON: %w", d.Type, ErrBadDraft)
	}
	if d.Type == event.TurnStarted && len(d.Data) > MaxClientMessageIDBytes {
		var v event.TurnStartedData
		_ = json.Unmarshal(d.Data, &v)
		if n := len(v.ClientMessageID); n > MaxClientMessageIDBytes {
			return fmt.Errorf("%s: clientMessageId %q is %d bytes, over the journal's limit of %d: %w",
				d.Type, prefix(v.ClientMessageID), n, MaxClientMessageIDBytes, ErrBadDraft)
		}
	}
	return nil
}

func (j *Journal) enqueue(r *request) error {
	j.qmu.Lock()
	if j.qclosed {
		j.qmu.Unlock()
		return ErrClosed
	}
	j.queue = append(j.queue, r)
	j.qmu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
	return nil
}

// take hands the whole queue to the writer.
func (j *Journal) take() []*request {
	j.qmu.Lock()
	defer j.qmu.Unlock()
	b := j.queue
	j.queue = nil
	for _, r := range b {
		r.taken = true
	}
	return b
}

// withdraw takes r out of the queue if the writer has not taken it yet.
func (j *Journal) withdraw(r *request) bool {
	j.qmu.Lock()
	defer j.qmu.Unlock()
	if r.taken {
		return false
	}
	if i := slices.Index(j.queue, r); i >= 0 {
		j.queue = slices.Delete(j.queue, i, i+1)
	}
	return true
}

// wait returns r's outcome. A ctx that ends while r is still queued
// withdraws it (never committed); once taken, the commit's outcome is awaited.
func (j *Journal) wait(ctx context.Context, r *request) ([]event.Event, error) {
	select {
	case <-r.done:
	case <-ctx.Done():
		if j.withdraw(r) {
			r.withdrawn = true
			r.err = fmt.Errorf("session %s: append not committed: %w", r.id, ctx.Err())
			close(r.done) // a Drain waiting on it moves on to r.prev
			return nil, r.err
		}
		<-r.done
	}
	if r.err != nil {
		return nil, r.err
	}
	return r.events, nil
}
