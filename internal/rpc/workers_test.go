package rpc

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestWorkerPool: workers that finish wait for the next job, at most
// maxIdleWorkers of them (the rest exit); a job goes to an idle worker
// when there is one; close ends every idle worker.
func TestWorkerPool(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var p workerPool
	defer p.close() // before goleak looks, also when the test fails
	state := func() (live, idle int) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.live, len(p.idle)
	}
	settle := func(wantLive, wantIdle int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			live, idle := state()
			if live == wantLive && idle == wantIdle {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d workers, %d idle; want %d, %d", live, idle, wantLive, wantIdle)
			}
		}
	}
	// side by side: n jobs that all wait for release
	sideBySide := func(n int) {
		release := make(chan struct{})
		var started, done sync.WaitGroup
		started.Add(n)
		done.Add(n)
		for range n {
			p.run(func() {
				started.Done()
				<-release
				done.Done()
			})
		}
		started.Wait() // none waited for another
		close(release)
		done.Wait()
	}
	sideBySide(maxIdleWorkers + 20)
	settle(maxIdleWorkers, maxIdleWorkers) // 20 exited
	hold, ran := make(chan struct{}), make(chan struct{})
	p.run(func() { <-hold; close(ran) })
	if live, idle := state(); live != maxIdleWorkers || idle != maxIdleWorkers-1 {
		t.Fatalf("a job did not go to an idle worker: %d workers, %d idle", live, idle)
	}
	close(hold)
	<-ran
	settle(maxIdleWorkers, maxIdleWorkers)
	p.close()
	settle(0, 0)
	ranAfter := make(chan struct{})
	p.run(func() { close(ranAfter) }) // a late job still runs, then its worker exits
	<-ranAfter
	settle(0, 0)
}
