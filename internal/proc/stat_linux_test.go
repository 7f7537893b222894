package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	// fields 9..21, then 22 starttime, then more
	tail := " 9 10 11 12 13 14 15 16 17 18 19 20 21 4242 23 24\n"
	tests := []struct {
		name string
		line string
		want statInfo
		err  error
	}{
		{"plain", "123 (sleep) S 1 123 99 0 -1" + tail, statInfo{State: 'S', PPID: 1, PGID: 123, SID: 99, NumThreads: 20, StartTicks: 4242}, nil},
		{"spaces and parens in comm", "7 (a) b) (c d) Z 5 6 7 0 -1" + tail, statInfo{State: 'Z', PPID: 5, PGID: 6, SID: 7, NumThreads: 20, StartTicks: 4242}, nil},
		{"comm is just )", "7 ()) R 5 6 7 0 -1" + tail, statInfo{State: 'R', PPID: 5, PGID: 6, SID: 7, NumThreads: 20, StartTicks: 4242}, nil},
		{"no paren", "7 sleep S 1 2 3", statInfo{}, errBadStat},
		{"truncated", "7 (x) S 1 2 3 4", statInfo{}, errBadStat},
		{"bad number", "7 (x) S a 2 3 0 -1" + tail, statInfo{}, errBadStat},
		{"bad starttime", "7 (x) S 1 2 3 0 -1 9 10 11 12 13 14 15 16 17 18 19 20 21 zz 23", statInfo{}, errBadStat},
		{"empty", "", statInfo{}, errBadStat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.line))
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err == nil && got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// The fast reader agrees with a naive parse of a real stat line.
func TestStatReaderAgreesWithNaiveParse(t *testing.T) {
	r, err := newStatReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	pid := os.Getpid()
	st, err := r.read(pid)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if got := fmt.Sprint(st.PPID, st.PGID, st.SID, st.NumThreads, st.StartTicks); got != strings.Join([]string{f[1], f[2], f[3], f[17], f[19]}, " ") {
		t.Errorf("reader %q, naive %v", got, f[:20])
	}
	if _, err := r.read(1 << 30); !errors.Is(err, errNoProc) {
		t.Errorf("absent pid: err = %v, want errNoProc", err)
	}
}

func TestEnvTagsAndMatch(t *testing.T) {
	want := Tags{SessionID: "s1", Fence: 3, StateID: "st"}
	env := func(kv ...string) []byte { return []byte(strings.Join(kv, "\x00") + "\x00") }
	tests := []struct {
		name    string
		environ []byte
		match   bool
	}{
		{"exact", env("PATH=/bin", "SESSIOND_SESSION_ID=s1", "SESSIOND_FENCE=3", "SESSIOND_STATE_ID=st"), true},
		{"other fence", env("SESSIOND_SESSION_ID=s1", "SESSIOND_FENCE=4", "SESSIOND_STATE_ID=st"), false},
		{"other state dir", env("SESSIOND_SESSION_ID=s1", "SESSIOND_FENCE=3", "SESSIOND_STATE_ID=zz"), false},
		{"other session", env("SESSIOND_SESSION_ID=s2", "SESSIOND_FENCE=3", "SESSIOND_STATE_ID=st"), false},
		{"prefix only", env("SESSIOND_SESSION_ID=s1x", "SESSIOND_FENCE=3", "SESSIOND_STATE_ID=st"), false},
		{"no tags", env("PATH=/bin"), false},
		{"empty", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := envTags(tt.environ)
			if m := want.matches(got); m != tt.match {
				t.Errorf("matches(%+v) = %v, want %v", got, m, tt.match)
			}
		})
	}
	anyFence := Tags{SessionID: "s1", StateID: "st"}
	if got, _ := envTags(env("SESSIOND_SESSION_ID=s1", "SESSIOND_FENCE=9", "SESSIOND_STATE_ID=st")); !anyFence.matches(got) {
		t.Error("Fence 0 must match any fence")
	}
	if (Tags{}).matches(Tags{}) {
		t.Error("empty tags must match nothing")
	}
}

func TestRingKeepsTail(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{"under", 8, []string{"ab", "cd"}, "abcd"},
		{"over in pieces", 4, []string{"abc", "def", "gh"}, "efgh"},
		{"one big write", 3, []string{"abcdef"}, "def"},
		{"many small", 5, strings.Split("abcdefghijklmnopqrstuvwxyz", ""), "vwxyz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(tt.max)
			for _, w := range tt.writes {
				r.Write([]byte(w))
			}
			if got := r.String(); got != tt.want {
				t.Errorf("tail = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestZombieNeedsAllThreadsGone(t *testing.T) {
	tests := []struct {
		st   statInfo
		want bool
	}{
		{statInfo{State: 'Z', NumThreads: 1}, true},
		{statInfo{State: 'X', NumThreads: 0}, true},
		{statInfo{State: 'Z', NumThreads: 5}, false}, // leader exited, threads still exiting
		{statInfo{State: 'S', NumThreads: 1}, false},
		{statInfo{State: 'D', NumThreads: 1}, false},
	}
	for _, tt := range tests {
		if got := tt.st.zombie(); got != tt.want {
			t.Errorf("%+v zombie = %v, want %v", tt.st, got, tt.want)
		}
	}
}

func TestStateAndOutcomeNames(t *testing.T) {
	var s State = Unverifiable
	var o Outcome = Unverifiable
	if s.String() != "unverifiable" || o.String() != "unverifiable" || Live.String() != "live" ||
		IdentityMismatch.String() != "identity-mismatch" {
		t.Errorf("names: %v %v %v %v", s, o, Live, IdentityMismatch)
	}
}

// A process group id is a pid number and can be reused once the group is
// empty: a member must also be in the group's session and carry no other
// session's tags.
func TestTreeGroupMembership(t *testing.T) {
	q := treeQuery{group: 100, sid: 7, tags: Tags{SessionID: "s1", Fence: 2, StateID: "st"}}
	mine := Tags{SessionID: "s1", Fence: 2, StateID: "st"}
	tests := []struct {
		name string
		p    procEntry
		want bool
	}{
		{"untagged member", procEntry{st: statInfo{PGID: 100, SID: 7}}, true},
		{"tagged member", procEntry{st: statInfo{PGID: 100, SID: 7}, tags: mine}, true},
		{"other group", procEntry{st: statInfo{PGID: 101, SID: 7}}, false},
		{"same pgid, other session: a reused group id", procEntry{st: statInfo{PGID: 100, SID: 8}}, false},
		{"another sessiond session's process", procEntry{st: statInfo{PGID: 100, SID: 7}, tags: Tags{SessionID: "s2", Fence: 1, StateID: "st"}}, false},
		{"our session, newer fence", procEntry{st: statInfo{PGID: 100, SID: 7}, tags: Tags{SessionID: "s1", Fence: 3, StateID: "st"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := q.inGroup(tt.p); got != tt.want {
				t.Errorf("inGroup = %v, want %v", got, tt.want)
			}
		})
	}
	if (treeQuery{}).inGroup(procEntry{}) {
		t.Error("no group: nothing is a member")
	}
}
