// Package store opens the one bbolt file of a sessiond state directory,
// keeps its schema version, and holds the durable session records.
//
// # Schema
//
// The whole file, drawn once, here (other packages point at this drawing).
// A name ending in "/" is a bucket, anything else a key; <…> stands for
// every name of that kind; integer keys and values are 8-byte big-endian.
//
//	meta/
//	  schema_version          -> u64: len(migrations) of the build that last opened it
//	  state_id                -> random id of this state dir (env tag SESSIOND_STATE_ID)
//	  home                    -> {path, dev, ino} of the file where it was created or last adopted (home.go)
//	  cursor_key              -> 32 random bytes: the secret agentSession.list cursors are signed with (schema 2)
//	sessions/
//	  <sessionId>             -> Record (JSON)
//	leases/
//	  <sessionId>             -> lease.Record (JSON), written by internal/lease
//	runtimes/
//	  <runtimeId>             -> RuntimeRecord (JSON): a shared runtime not yet proven gone (schema 3, runtimes.go)
//	journal/
//	  <sessionId>/            -> one bucket per session, written by internal/journal
//	    events/
//	      <seq>               -> the event's row (JSON, event.AppendJSON's encoding)
//	    meta/
//	      last_seq            -> u64: the highest seq ever given (never reused)
//	      oldest_seq          -> u64: the oldest seq retention kept (0: none yet)
//	      open_turn           -> turnId of the running turn ("": none)
//	      open_turn_seq       -> u64: seq of that turn's turn.started
//	      approvals           -> JSON [{requestId, turnId}] pending approvals
//	      losses              -> u64: events that could not be stored (journal.loss)
//	    dedup/
//	      <clientMessageId>   -> turnId (written with the turn.started carrying it)
//
// The rule: a change to this tree (a bucket, a key, a value's encoding)
// adds a migration to the ordered migrations slice (store.go; the schema
// version is its length) and a test of that migration, and changes this
// drawing: TestSchemaDrawing walks a freshly opened store and fails on any
// bucket or key the drawing does not have, or the store does not.
//
// Next to the file: sessiond.db.created, the marker written when the store
// is created (see marker.go), and any sessiond.db.corrupt-… or
// sessiond.db.lost-… an operator moved aside. Opening validates the file
// before bbolt maps it and runs bbolt's consistency check (open.go): a
// damaged, truncated, or missing-where-it-existed store is refused with
// a *RefusalError, never a panic or a silent empty start.
package store
