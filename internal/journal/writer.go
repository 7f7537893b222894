package journal

import "slices"

// run is the writer goroutine: group commit until stopped, then commit
// whatever is still queued. While the store refuses writes, sink requests
// taken alone are held without a try (the backoff retries them); a batch
// with a waiting caller is tried at once, the held requests first.
func (j *Journal) run() {
	defer close(j.done)
	retry := newBackoff()
	defer retry.t.Stop()
	for {
		if b := j.take(); len(b) > 0 {
			if j.onTake != nil {
				j.onTake(b)
			}
			if err := j.Unavailable(); err != nil && !hasSync(b) {
				j.hold(b, err)
			} else {
				j.commit(j.withHeld(b))
			}
			j.rearm(retry)
			continue
		}
		select {
		case <-j.wake:
		case <-retry.fired():
			retry.done()
			j.commit(j.withHeld(nil))
			j.rearm(retry)
		case <-j.stop:
			if b := j.withHeld(j.take()); len(b) > 0 {
				j.commit(b)
				if len(j.held) > 0 { // nothing will write them now
					j.fail(j.held, j.Unavailable())
					j.held, j.heldBytes = nil, 0
				}
				continue
			}
			return
		}
	}
}

// commit writes a batch in one transaction, then installs the new derived
// state, publishes the events and wakes the callers. A request the store
// refuses (a key over bbolt's limit, any error caused by its own content)
// fails alone: the transaction is rolled back and the rest of the batch is
// retried without it, so a neighbour never pays for it. An asynchronous
// sink append that fails is replaced, in place, by a journal.loss row (and
// its open turn completed failed): the loss is visible where it happened.
// A failure of the store as a whole (no request to blame) is refused
// (unavailable.go): waiting callers fail, sink requests are held.
func (j *Journal) commit(batch []*request) {
	var alone []*request // failed alone; woken once the rest is settled
	for len(batch) > 0 {
		a, blame, err := j.try(batch)
		if err == nil {
			j.markWritable(len(batch)) // before install wakes the callers
			j.install(batch, a)
			break
		}
		if len(blame) == 0 {
			j.refused(batch, err)
			break
		}
		batch = j.isolate(batch, blame, err)
		alone = append(alone, blame...)
	}
	for _, r := range alone {
		close(r.done)
	}
}

// isolate fails the blamed requests and returns the batch without them; a
// failed sink append is replaced by a loss note for its session.
func (j *Journal) isolate(batch, blame []*request, err error) []*request {
	out := make([]*request, 0, len(batch))
	for _, r := range batch {
		if !slices.Contains(blame, r) {
			out = append(out, r)
			continue
		}
		r.err, r.events = err, nil
		j.log.Error("journal request refused by the store; the rest of its batch is retried without it",
			"session_id", prefix(r.id), "events", r.count(), "err", err)
		j.mu.Lock()
		j.stats.Isolated++
		if r.sink != nil && r.loss == nil {
			j.stats.Lost += uint64(r.count())
		}
		j.mu.Unlock()
		switch {
		case r.sink == nil:
		case r.loss != nil:
			r.sink.noteLoss(r.loss.count, r.loss.cause) // even the note failed
		default:
			out = append(out, &request{id: r.id, sink: r.sink, done: make(chan struct{}),
				loss: &lossNote{count: r.count(), cause: lossCause(err)}})
		}
	}
	return out
}

// current returns a copy of a session's committed derived state. Only the
// writer changes it, so reading it here without the lock is safe; the lock
// guards the map against Subscribe inserting entries.
func (j *Journal) current(id string) *derived {
	j.mu.Lock()
	defer j.mu.Unlock()
	if s := j.sessions[id]; s != nil {
		return s.d.clone()
	}
	return &derived{}
}

// fail fails every request of a batch that will not be stored (held too
// long, or still held at Close). The sinks keep their losses and journal
// them with their next hand-in.
func (j *Journal) fail(batch []*request, err error) {
	j.mu.Lock()
	for _, r := range batch {
		if r.sink != nil && r.loss == nil {
			j.stats.Lost += uint64(r.count())
		}
	}
	j.mu.Unlock()
	for _, r := range batch {
		r.events = nil
		r.err = err
		if r.sink != nil {
			cause := lossCause(err)
			if r.loss != nil {
				cause = r.loss.cause
			}
			r.sink.noteLoss(r.count(), cause)
		}
		close(r.done)
	}
}

// install makes a committed batch visible: derived state, then publication
// in commit order, then the callers.
func (j *Journal) install(batch []*request, a *attempt) {
	j.mu.Lock()
	for id := range a.deleted {
		if s := j.sessions[id]; s != nil {
			for sub := range s.subs {
				sub.end(false)
			}
			delete(j.sessions, id)
		}
	}
	for id, d := range a.work {
		s := j.sessions[id]
		if s == nil {
			s = &session{subs: map[*Subscription]struct{}{}}
			j.sessions[id] = s
		}
		s.d = *d
	}
	for _, r := range batch {
		s := j.sessions[r.id]
		if s == nil || len(s.subs) == 0 {
			continue
		}
		for i := range r.events {
			for sub := range s.subs {
				if !sub.push(r.events[i]) {
					delete(s.subs, sub)
					j.stats.Lagged++
					j.log.Warn("journal subscriber lagged; detached", "session_id", r.id,
						"seq", r.events[i].Seq)
				}
			}
		}
	}
	j.stats.Commits++
	j.stats.Appends += a.n
	j.stats.Dropped += a.skipped
	j.mu.Unlock()
	if j.opts.Observe != nil {
		for _, r := range batch {
			if len(r.events) > 0 {
				j.opts.Observe(r.events)
			}
		}
	}
	for _, r := range batch {
		if r.loss != nil {
			j.log.Warn("journal loss recorded", "session_id", r.id, "events", r.loss.count, "cause", r.loss.cause)
		}
	}
	for _, r := range batch {
		r.prev = nil
		close(r.done)
	}
}
