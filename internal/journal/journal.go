// Package journal is the durable, append-only event log of every session.
//
// Its rows live in the store's `journal` bucket, one bucket per session
// (events, derived meta, dedup index): the schema is drawn once, in the
// store package comment (go doc internal/store).
//
// One writer goroutine takes every pending append, from all sessions, and
// commits them in one bbolt transaction (group commit); the derived state
// (seq counters, running turn, pending approvals, dedup index) is written in
// that same transaction. Only after the commit returns are the events
// installed in memory and published to subscribers: nothing a crash could
// take back is ever published.
//
// Cancellation: a caller of Append or Sink.Commit whose ctx ends while its
// drafts wait in the queue takes them out again and gets the ctx error:
// nothing was or will be committed. If the writer already took them, the call
// waits for that commit (bounded by one transaction) and reports its real
// outcome. So an append is either committed and reported, or not committed:
// never lost after a success, never duplicated (a batch is retried only
// after its transaction rolled back, without the request that failed it).
//
// A store that refuses writes as a whole (disk full, an I/O error:
// store.ErrUnavailable) fails the waiting callers at once and holds the
// sinks' asynchronous rows, in order and bounded, until it takes writes
// again (unavailable.go): nothing is published before its commit, so no
// published event is lost.
//
// Lock order: Journal.mu, then Subscription.mu. Sink.mu is taken before
// Journal.qmu (enqueue) and never while holding Journal.mu.
package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/event"
	bolt "go.etcd.io/bbolt"
)

// Defaults of Options and read limits.
const (
	DefaultCoalesceWindow = 5 * time.Millisecond
	DefaultCoalesceBytes  = 16 << 10
	DefaultMaxEvents      = 100000
	DefaultQueueEvents    = 4096
	DefaultQueueBytes     = 4 << 20
	DefaultReadLimit      = 256
	MaxReadLimit          = 4096
	DefaultPageBytes      = 1 << 20

	// MaxClientMessageIDBytes bounds a clientMessageId, the key of the
	// dedup index (bbolt refuses keys over 32 KiB); MaxSessionIDBytes a
	// session id, a bucket name. The RPC edge's limits are lower; these
	// keep the store safe whoever calls.
	MaxClientMessageIDBytes = 1024
	MaxSessionIDBytes       = 1024
)

// Options configure a Journal; zero fields take the defaults.
type Options struct {
	Now            func() time.Time
	CoalesceWindow time.Duration // default 5ms; negative: no coalescing window (flush at once)
	CoalesceBytes  int           // default 16 KiB
	MaxEvents      int           // retention per session, default 100000 (0 = default)
	QueueEvents    int           // subscriber queue, default 4096
	QueueBytes     int           // default 4 MiB
	PageBytes      int           // cap of a Read page / Subscribe snapshot in stored bytes, default 1 MiB
	HeldBytes      int           // sink rows held while the store refuses writes, default 8 MiB (unavailable.go)
	Logger         *slog.Logger
	// Observe, if set, is told of every committed event of every session,
	// in commit order, after it is installed and published (the state
	// State reports includes it). It runs on the writer goroutine: it must
	// return at once (the daemon's attention queues what it needs).
	Observe func([]event.Event)
}

// Errors of the journal.
var (
	// ErrClosed: the journal was closed; nothing more is appended.
	ErrClosed = errors.New("journal closed")
	// ErrSinkClosed: Commit on a sink after Close or Discard.
	ErrSinkClosed = errors.New("sink closed")
	// ErrBadDraft: a draft without a type, or an empty session id.
	ErrBadDraft = errors.New("bad event draft")
	// ErrNoBucket: the store has no journal bucket (not opened through store.Open).
	ErrNoBucket = errors.New("journal bucket missing")
	// ErrLost: a sink's asynchronous appends failed and not even their
	// journal.loss row could be stored (Sink.Drain).
	ErrLost = errors.New("events lost")
	// ErrLagged ends a Subscription whose queue overflowed.
	ErrLagged = errors.New("subscriber lagged")
	// ErrSubscriptionClosed ends a Subscription that was closed, or whose
	// journal was.
	ErrSubscriptionClosed = errors.New("subscription closed")
)

// State is a session's derived journal state, kept in memory.
type State struct {
	LastSeq, OldestSeq uint64
	OpenTurn           string // turnId of the running turn, "" when none
	OpenTurnSeq        uint64
	PendingApprovals   []string // request ids, in request order
	Lost               uint64   // events lost, as journal.loss rows count them
}

// Stats are counters since Open.
type Stats struct {
	Appends     uint64 // events committed
	Commits     uint64 // transactions
	Lagged      uint64 // subscribers detached for a full queue
	Dropped     uint64 // drafts not journaled: a closed sink, or a turn a loss failed
	Failed      uint64 // transactions the store refused as a whole (unavailable.go)
	Isolated    uint64 // requests the store refused, failed alone
	Lost        uint64 // events of sink appends that could not be stored
	Subscribers int    // attached now
	// LostBySession: sessions whose journal records a loss (journal.loss
	// rows, ever), with the events lost.
	LostBySession map[string]uint64
	// Unavailable is the store's failure while it refuses writes ("" when
	// it takes them), since UnavailableSince; Held the sink requests held
	// meanwhile.
	Unavailable      string
	UnavailableSince time.Time
	Held             int
}

// Journal is the event log over one bbolt file.
type Journal struct {
	db   *bolt.DB
	opts Options
	log  *slog.Logger

	// qmu guards the writer's queue.
	qmu     sync.Mutex
	queue   []*request
	qclosed bool
	wake    chan struct{}

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	// mu guards sessions (their derived state and subscribers), sinks,
	// stats and closed.
	mu       sync.Mutex
	sessions map[string]*session
	sinks    map[string]*Sink
	stats    Stats
	closed   bool

	onTake func([]*request) // tests: told of every batch the writer takes

	// Only the writer goroutine touches held and heldBytes (unavailable.go).
	held      []*request // sink requests of batches the store refused, oldest first
	heldBytes int
	nheld     int // len(held), guarded by mu, for Stats

	// Guarded by mu: the store's failure while it refuses writes (nil
	// while it takes them), since when, and a channel closed meanwhile.
	unavail   error
	unavailAt time.Time
	unavailCh chan struct{}

	garbageMu sync.Mutex
	garbage   map[string]bool // "<id>/<seq>" rows already logged as undecodable
}

// session is one session's in-memory state.
type session struct {
	d    derived
	subs map[*Subscription]struct{}

	// Rows up to loaded were in the file at Open; rows up to verified were
	// read back valid since (see rowReader).
	loaded, verified uint64
}

// Open loads every session's derived state and starts the writer.
func Open(db *bolt.DB, opts Options) (*Journal, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CoalesceWindow == 0 {
		opts.CoalesceWindow = DefaultCoalesceWindow
	}
	if opts.CoalesceBytes <= 0 {
		opts.CoalesceBytes = DefaultCoalesceBytes
	}
	if opts.MaxEvents <= 0 {
		opts.MaxEvents = DefaultMaxEvents
	}
	if opts.QueueEvents <= 0 {
		opts.QueueEvents = DefaultQueueEvents
	}
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = DefaultQueueBytes
	}
	if opts.PageBytes <= 0 {
		opts.PageBytes = DefaultPageBytes
	}
	if opts.HeldBytes <= 0 {
		opts.HeldBytes = DefaultHeldBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	j := &Journal{
		db: db, opts: opts, log: opts.Logger,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		sessions: map[string]*session{}, sinks: map[string]*Sink{}, garbage: map[string]bool{},
		unavailCh: make(chan struct{}),
	}
	if err := j.load(); err != nil {
		return nil, err
	}
	go j.run()
	return j, nil
}

// Close flushes every sink, commits what is pending, stops the writer and
// ends every subscription (queued events first, then
// ErrSubscriptionClosed). Later appends fail with ErrClosed.
func (j *Journal) Close() error {
	j.closeOnce.Do(func() {
		j.mu.Lock()
		sinks := make([]*Sink, 0, len(j.sinks))
		for _, s := range j.sinks {
			sinks = append(sinks, s)
		}
		j.mu.Unlock()
		for _, s := range sinks {
			s.flush()
		}
		j.qmu.Lock()
		j.qclosed = true
		j.qmu.Unlock()
		close(j.stop)
		<-j.done
		j.mu.Lock()
		j.closed = true
		for _, s := range j.sessions {
			for sub := range s.subs {
				sub.end(false)
			}
			clear(s.subs)
		}
		j.mu.Unlock()
	})
	return nil
}

// Append commits drafts for a session that has no open sink (the startup
// tail, session.created). It returns the committed events, durable on return.
func (j *Journal) Append(ctx context.Context, sessionID string, ds ...event.Draft) ([]event.Event, error) {
	r, err := newRequest(sessionID, ds)
	if err != nil || r == nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("session %s: append not committed: %w", sessionID, err)
	}
	if err := j.enqueue(r); err != nil {
		return nil, fmt.Errorf("session %s: %w", sessionID, err)
	}
	return j.wait(ctx, r)
}

// State returns the session's derived state (zero for an unknown session).
func (j *Journal) State(sessionID string) State {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.sessions[sessionID]
	if s == nil {
		return State{}
	}
	return s.d.state()
}

// Sessions lists the sessions that have a journal.
func (j *Journal) Sessions() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]string, 0, len(j.sessions))
	for id, s := range j.sessions {
		if s.d.LastSeq > 0 {
			out = append(out, id)
		}
	}
	return out
}

// Delete removes a session's journal (events, meta, dedup index), in order
// after every append handed in before it. Its subscriptions end.
func (j *Journal) Delete(sessionID string) error {
	if sessionID == "" {
		return fmt.Errorf("delete: %w", ErrBadDraft)
	}
	r := &request{id: sessionID, del: true, done: make(chan struct{})}
	if err := j.enqueue(r); err != nil {
		return fmt.Errorf("session %s: %w", sessionID, err)
	}
	<-r.done
	if r.err != nil {
		return fmt.Errorf("session %s: delete journal: %w", sessionID, r.err)
	}
	return nil
}
