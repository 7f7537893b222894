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
// Ordering (one loop, in commit order): for each batch of events the
// inhibitor is released first when no turn runs any more, then each
// notice is queued for the desktop and handed to the connections. No call
// that can hang runs on the loop: Inhibit (and the start's Probe) runs on
// a taker goroutine, one call at a time (a failure is tried again only
// retryAfter on, at a later batch), and desktop posts on a poster goroutine
// behind a bounded queue (past maxPosts they are dropped, logged once). A
// client told that the last turn ended therefore finds the inhibitor
// released; one told that a turn started may hear it before the
// inhibitor is held; a logind or notification service that never answers
// delays no notice, no release and no shutdown (Close cancels the calls
// under way). A daemon that is SIGKILLed releases the inhibitor with its
// process (the kernel closes the descriptor).
package attention
