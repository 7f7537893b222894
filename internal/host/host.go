// Package host is the authoritative session map: it turns holds into live
// provider children and lets them go, through the eviction steps, when
// nobody wants them any more.
//
// The map holds only sessions with a child or a pending teardown; a stored
// session lives on disk. Each entry has a session lock (entry.mu) that
// serializes its lifecycle: start, send, eviction. The map lock (Host.mu)
// guards the map, the holds, the subscriptions, the connections and the
// entry fields that readers (list, get) need, and is held only briefly.
//
// Lock order: session lock, then map lock. Never take a session lock while
// holding the map lock. Functions named …MapLocked need the map lock held;
// other functions named …Locked need the session lock held.
package host

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/config"
	"github.com/sessiond/sessiond/internal/journal"
	"github.com/sessiond/sessiond/internal/lease"
	"github.com/sessiond/sessiond/internal/proc"
	"github.com/sessiond/sessiond/internal/provider"
	"github.com/sessiond/sessiond/internal/store"
)

// Provider is a configured provider profile. New builds the adapter of
// its protocol over a spawned child; the host does not know which one.
type Provider struct {
	Name    string
	Command []string
	Env     map[string]string
	New     provider.New
	// ResumeArgs, when set, is appended to Command for a session that has
	// a thread (a protocol that resumes on its command line).
	ResumeArgs func(threadID string) []string
	// FreshThread, when set, mints the id of a fresh thread (or takes
	// reuse, an id minted earlier whose thread the provider never began)
	// and returns the arguments appended to Command that give it to the
	// provider (a protocol whose threads can be named by their client):
	// the session has its thread id from the start, before any turn.
	FreshThread func(reuse string) (threadID string, args []string, err error)
	// Adopt, when set, rebuilds the protocol's adapter around a child
	// handed over by a live upgrade; nil: a live session of this provider
	// refuses the upgrade.
	Adopt provider.Adopt
	// Shared (processes = "account") runs the profile's sessions as
	// threads of one runtime per account, built by NewRuntime (a protocol
	// that can share); without NewRuntime a session has its own process.
	Shared     bool
	NewRuntime provider.NewRuntime
	// AdoptRuntime, when set, rebuilds a shared runtime handed over by a
	// live upgrade; nil: a live runtime of this provider refuses it.
	AdoptRuntime provider.AdoptRuntime
	// Accounts are the profile's named envs besides "default" (the
	// profile's own Env), overlaid on it; Failover is the order tried when
	// an account is rate-limited; Mover carries a thread's copy between
	// two accounts (nil: nothing to carry, a switch is portable).
	Accounts map[string]map[string]string
	Failover []string
	Mover    provider.Mover
}

// Options configures a Host.
type Options struct {
	Store        *store.Store
	Journal      *journal.Journal
	Providers    map[string]Provider
	IdleTimeout  time.Duration
	StartTimeout time.Duration
	StepTimeout  time.Duration
	Ladder       proc.Ladder
	Logger       *slog.Logger
	Clock        Clock // nil: real time
	// MaxHoldsPerConn and MaxSubsPerConn are the per-connection limits
	// (0: config.DefaultMaxHoldsPerConn and DefaultMaxSubsPerConn).
	MaxHoldsPerConn int
	MaxSubsPerConn  int
	// RequestTimeout bounds each request to a provider (0: the provider
	// package's default).
	RequestTimeout time.Duration
	// PortableHistoryBytes bounds the history a portable account switch
	// carries (0: config.DefaultPortableHistoryBytes).
	PortableHistoryBytes int
	// Cgroups, when set, is cgroup mode: each child is spawned into a
	// cgroup of its own, and the startup reap empties a crashed run's.
	Cgroups *proc.Cgroups
}

// Host is the session map. It implements api.Backend.
type Host struct {
	o       Options
	log     *slog.Logger
	st      *store.Store
	j       *journal.Journal
	leases  *lease.Manager
	cleanup *proc.Cleanup
	clock   Clock
	bootID  string

	// stopChild runs the close ladder; tests replace it to simulate a root
	// that cannot be proven exited.
	stopChild func(ctx context.Context, c *proc.Child, l proc.Ladder) proc.Verdict
	// scanTagged lists the processes carrying our tags (proc.ScanTagged);
	// tests replace it to make the startup's tag scan unavailable (as with
	// /proc mounted hidepid, or a provider running as another uid).
	scanTagged func(stateID string) ([]proc.Tagged, error)
	// reapProc stops a previous run's process by its identity at startup
	// (proc.Reap); tests replace it to simulate one that cannot be
	// proven gone.
	reapProc func(ctx context.Context, log *slog.Logger, id proc.Identity, tags proc.Tags, l proc.Ladder) proc.Verdict

	mu       sync.Mutex // map lock
	sessions map[string]*entry
	runtimes map[runtimeKey]*sharedRuntime // live and starting shared runtimes
	loaded   map[string]*sharedRuntime     // provider thread id -> the runtime that has it loaded
	// stale: thread id -> runtimes that still have a copy of the thread
	// loaded that an account switch left behind (never resumed there
	// again while they run).
	stale   map[string]map[*sharedRuntime]bool
	limited map[runtimeKey]time.Time // rate-limited accounts -> when the limit lifts
	// diedInHandoff: sessions whose handed-over process (their child or
	// their runtime) exited between the old image's freeze and Adopt; the
	// provider died, the daemon did not restart (startup.go's tail).
	diedInHandoff map[string]bool
	// handedOver: ids of the sessions and runtimes Adopt took over in
	// this process (adoptedMapLocked).
	handedOver map[string]bool
	subs       map[string]*subscription
	conns      map[string]*connState
	closing    bool

	// starts is cancelled (cause errShuttingDown) when the shutdown
	// begins: a provider start in progress gives up and tears its child
	// down instead of waiting out its handshake.
	starts       context.Context
	cancelStarts context.CancelCauseFunc

	// runtimeEvicting, when set (tests), is told a runtime's teardown
	// began: it has left the map, its process still runs.
	runtimeEvicting func(runtimeID string)
	// runtimeIdleDecided, when set (tests), is told the runtime's release
	// clock decided to stop it, before its teardown begins.
	runtimeIdleDecided func(runtimeID string)

	// afterTurnBegins, when set (tests), runs first in afterTurn's
	// goroutine, before it waits for the session lock.
	afterTurnBegins func()

	stats counters
	wg    sync.WaitGroup // watchers and timers' work
}

// New builds a Host on an opened store and journal.
func New(o Options) (*Host, error) {
	if o.Store == nil || o.Journal == nil {
		return nil, errors.New("host: store and journal are required")
	}
	for name, p := range o.Providers {
		if p.New == nil || len(p.Command) == 0 {
			return nil, fmt.Errorf("host: provider %q needs a command and a protocol adapter", name)
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	// Defaults live in config; a zero value means the documented one.
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = config.DefaultIdleTimeout
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = config.DefaultStartTimeout
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = config.DefaultStepTimeout
	}
	if o.Ladder == (proc.Ladder{}) {
		o.Ladder = proc.Ladder{Grace: config.DefaultGrace, TermTimeout: config.DefaultTermTimeout, KillTimeout: config.DefaultKillTimeout}
	}
	if o.MaxHoldsPerConn <= 0 {
		o.MaxHoldsPerConn = config.DefaultMaxHoldsPerConn
	}
	if o.PortableHistoryBytes <= 0 {
		o.PortableHistoryBytes = config.DefaultPortableHistoryBytes
	}
	if o.MaxSubsPerConn <= 0 {
		o.MaxSubsPerConn = config.DefaultMaxSubsPerConn
	}
	boot, err := proc.BootID()
	if err != nil {
		o.Logger.Warn("boot id unavailable; owner probes will be unverifiable", "err", err)
	}
	h := &Host{
		o:             o,
		log:           o.Logger,
		st:            o.Store,
		j:             o.Journal,
		clock:         o.Clock,
		bootID:        boot,
		sessions:      make(map[string]*entry),
		runtimes:      make(map[runtimeKey]*sharedRuntime),
		loaded:        make(map[string]*sharedRuntime),
		stale:         make(map[string]map[*sharedRuntime]bool),
		limited:       make(map[runtimeKey]time.Time),
		diedInHandoff: map[string]bool{},
		handedOver:    map[string]bool{},
		subs:          make(map[string]*subscription),
		conns:         make(map[string]*connState),
	}
	h.starts, h.cancelStarts = context.WithCancelCause(context.Background())
	h.stopChild = func(ctx context.Context, c *proc.Child, l proc.Ladder) proc.Verdict { return c.Stop(ctx, l) }
	h.scanTagged, h.reapProc = proc.ScanTagged, proc.Reap
	h.leases = lease.New(o.Store.DB, probeOwner, o.Clock.Now)
	h.cleanup = proc.NewCleanup(o.Ladder, procClock{o.Clock}, o.Logger)
	return h, nil
}

// probeOwner answers the lease manager's question about a recorded owner.
func probeOwner(o lease.Owner) lease.Liveness {
	switch proc.Probe(proc.Identity{PID: o.PID, StartTicks: o.StartTicks, BootID: o.BootID}) {
	case proc.Alive:
		return lease.Alive
	case proc.PidAbsent:
		return lease.PidAbsent
	case proc.IdentityMismatch:
		return lease.IdentityMismatch
	case proc.BootChanged:
		return lease.BootChanged
	default:
		return lease.Unverifiable
	}
}

// Providers lists the configured provider names, sorted.
func (h *Host) Providers() []string {
	out := make([]string, 0, len(h.o.Providers))
	for n := range h.o.Providers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// newID returns prefix + 20 random base32 characters.
func newID(prefix string) string {
	var b [13]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("host: random id: %v", err))
	}
	return prefix + strings.ToUpper(idEncoding.EncodeToString(b[:])[:20])
}
