package proc

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// zombie starts a child nobody waits for yet and kills it; it returns the
// zombie's identity and a func that reaps it. The pid is registered so the
// subreaper leaves it alone.
func zombie(t *testing.T) Identity {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PROC_HELPER=sleep", "PROC_TEST_PID="+strconv.Itoa(os.Getpid()),
		"GORACE=atexit_sleep_ms=0")
	registry.Lock()
	err := cmd.Start()
	if err == nil {
		registry.pids[cmd.Process.Pid] = struct{}{}
	}
	registry.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	id := identityFor(t, cmd.Process.Pid, true)
	t.Cleanup(func() {
		cmd.Wait()
		registry.Lock()
		delete(registry.pids, id.PID)
		registry.Unlock()
	})
	fd, err := unix.PidfdOpen(id.PID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	// readable once it exited (a zombie: nobody waited)
	if _, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestProbeSweep(t *testing.T) {
	live := spawnHelper(t, "sleep")
	dead := spawnHelper(t, "cooperative")
	dead.Stdin().Close()
	<-dead.Exited()
	z := zombie(t)
	boot, err := BootID()
	if err != nil {
		t.Fatal(err)
	}
	lid := live.Identity()
	reused := lid
	reused.StartTicks++
	otherBoot := lid
	otherBoot.BootID = "00000000-0000-0000-0000-000000000000"
	noBoot := lid
	noBoot.BootID = ""
	tests := []struct {
		name string
		id   Identity
		want State
	}{
		{"live", lid, Alive},
		{"dead", dead.Identity(), PidAbsent},
		{"zombie", z, PidAbsent},
		{"reused pid", reused, IdentityMismatch},
		{"other boot", otherBoot, BootChanged},
		{"no boot id recorded", noBoot, Unverifiable},
		{"pid zero", Identity{BootID: boot}, PidAbsent},
		{"self", identityFor(t, os.Getpid(), true), Alive},
	}
	ids := make([]Identity, len(tests))
	for i, tt := range tests {
		ids[i] = tt.id
	}
	got := ProbeMany(ids)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got[i] != tt.want {
				t.Errorf("ProbeMany[%d] = %v, want %v", i, got[i], tt.want)
			}
			if one := Probe(tt.id); one != tt.want {
				t.Errorf("Probe = %v, want %v", one, tt.want)
			}
		})
	}
	if lid.BootID != boot || lid.StartTicks == 0 {
		t.Errorf("child identity %+v lacks boot id or start ticks", lid)
	}
}

func TestCannotEnumerate(t *testing.T) {
	tests := []struct {
		name string
		dir  string
	}{
		{"missing", t.TempDir() + "/nope"},
		{"empty", t.TempDir()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := spawnHelper(t, "cooperative")
			procDir.Store(&tt.dir)
			defer procDir.Store(nil)
			if _, err := ScanTagged(testStateID); !errorsIs(err, ErrCannotEnumerate) {
				t.Errorf("ScanTagged err = %v, want ErrCannotEnumerate", err)
			}
			// never "absent" when it could not look
			if st := Probe(h.Identity()); st != Unverifiable {
				t.Errorf("Probe = %v, want unverifiable", st)
			}
			// the root is our child (proven by Wait); the tree cannot be seen
			v := h.Stop(context.Background(), testLadder)
			if v.Root != Exited || v.Tree != Unverifiable {
				t.Errorf("verdict %v/%v, want exited/unverifiable", v.Root, v.Tree)
			}
		})
	}
}

// A cached live verdict follows the process: once it exits, the next sweep
// says so (its pidfd became readable).
func TestProbeCacheFollowsExit(t *testing.T) {
	h := spawnHelper(t, "cooperative")
	id := h.Identity()
	for range 2 { // the second answer comes from the cache
		if st := ProbeMany([]Identity{id, id})[1]; st != Alive {
			t.Fatalf("Probe = %v, want alive", st)
		}
	}
	cache.Lock()
	_, cached := cache.live[id]
	cache.Unlock()
	if !cached {
		t.Fatal("a live identity was not cached")
	}
	// duplicates in one sweep keep one pidfd, not one each
	resetProbeCache()
	n := openFDs(t)
	ProbeMany([]Identity{id, id, id})
	if got := openFDs(t); got != n+1 {
		t.Errorf("a sweep with one live identity three times holds %d more descriptors, want 1", got-n)
	}
	h.Stdin().Close()
	<-h.Exited()
	if st := Probe(id); st != PidAbsent {
		t.Errorf("Probe after exit = %v, want pid-absent", st)
	}
	if st := Probe(id); st != PidAbsent {
		t.Errorf("Probe from the gone cache = %v, want pid-absent", st)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
