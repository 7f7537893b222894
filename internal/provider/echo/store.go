package echo

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"time"
)

// errThreadNotFound: the thread has no file under the home directory.
var errThreadNotFound = errors.New("no rollout found")

var validThreadID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// threadStore keeps one file per thread, <dir>/<threadId>.jsonl: a header
// line, then one line per finished turn, appended.
type threadStore struct{ dir string }

type threadHeader struct {
	ThreadID  string    `json:"threadId"`
	Cwd       string    `json:"cwd"`
	CreatedAt time.Time `json:"createdAt"`
}

// turnRecord is one line of a thread's history.
type turnRecord struct {
	TurnID string `json:"turnId"`
	Input  string `json:"input"`
	Answer string `json:"answer"`
	Status string `json:"status"`
}

func newThreadID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("echo: rand: " + err.Error())
	}
	return "thr_" + hex.EncodeToString(b[:])
}

func (st threadStore) path(id string) string { return filepath.Join(st.dir, id+".jsonl") }

func (st threadStore) create(id, cwd string) error {
	f, err := os.OpenFile(st.path(id), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("thread %s: %w", id, err)
	}
	b, _ := json.Marshal(threadHeader{ThreadID: id, Cwd: cwd, CreatedAt: time.Now().UTC()})
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("thread %s: %w", id, err)
	}
	return nil
}

// load reads a thread's header and history; errThreadNotFound when absent.
func (st threadStore) load(id string) (threadHeader, []turnRecord, error) {
	var h threadHeader
	if !validThreadID.MatchString(id) {
		return h, nil, fmt.Errorf("thread %q: %w", id, errThreadNotFound)
	}
	f, err := os.Open(st.path(id))
	if errors.Is(err, os.ErrNotExist) {
		return h, nil, fmt.Errorf("thread %s: %w", id, errThreadNotFound)
	}
	if err != nil {
		return h, nil, fmt.Errorf("thread %s: %w", id, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var turns []turnRecord
	for first := true; sc.Scan(); first = false {
		if first {
			_ = json.Unmarshal(sc.Bytes(), &h)
			continue
		}
		var r turnRecord
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			turns = append(turns, r)
		}
	}
	if err := sc.Err(); err != nil {
		return h, nil, fmt.Errorf("thread %s: %w", id, err)
	}
	return h, turns, nil
}

// appendTurn adds a finished turn; a thread forgotten meanwhile stays gone.
func (st threadStore) appendTurn(id string, r turnRecord) error {
	f, err := os.OpenFile(st.path(id), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("thread %s: %w", id, err)
	}
	b, _ := json.Marshal(r)
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("thread %s: %w", id, err)
	}
	return nil
}

func (st threadStore) remove(id string) error {
	if err := os.Remove(st.path(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("thread %s: %w", id, err)
	}
	return nil
}

// errActiveWriter: another live process has the thread loaded.
var errActiveWriter = errors.New("already has an active writer")

// lockWriter takes the thread's writer lock, <dir>/<threadId>.lock (an
// flock the kernel drops when the process exits, however it exits).
func (st threadStore) lockWriter(id string) (*os.File, error) {
	if !validThreadID.MatchString(id) {
		return nil, fmt.Errorf("invalid thread id %q", id)
	}
	f, err := os.OpenFile(filepath.Join(st.dir, id+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("thread %s: writer lock: %w", id, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("thread %s %w", id, errActiveWriter)
		}
		return nil, fmt.Errorf("thread %s: writer lock: %w", id, err)
	}
	return f, nil
}
