// Package attention keeps the machine awake while agents work and tells
// the user when one needs them (PROTOCOL.md "Attention").
//
// An Attention observes the journal's committed events of every session
// (journal.Options.Observe): turn.started and turn.completed make it count
// the turns running now (derived from the journal's state, never kept
// beside it, so a provider that crashed mid-turn — its turn.completed
// {interrupted} — or a restart cannot leave the count wrong), and holds
// one sleep inhibitor (Inhibitor: systemd-logind over the system D-Bus,
// caffeinate on macOS) while that count is above zero. turn.completed and
// approval.requested become Notices: handed to rpc for the connections
// that negotiated daemon.attention.v1, and with notify = "desktop" posted
// as a desktop notification when no surface is attached to the session.
//
// Ordering (one goroutine, in commit order): for each batch of events the
// inhibitor is taken or released first, then each notice goes to the
// desktop, then to the connections. A client that received a notice
// therefore sees the inhibitor state and the desktop notification that
// the same event caused; a daemon that is SIGKILLed releases the
// inhibitor with its process (the kernel closes the descriptor).
package attention
