package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/internal/host"
)

// The live upgrade's handoff: one JSON file in the state dir, written by
// the old image just before it re-executes itself, read (and removed) by
// the new image before it opens anything else. docs/internals.md ("Live
// upgrade") says what each field is for.

// handoffFormat is the format this binary writes; HandoffFormats are those
// it reads (`sessiond version --handoff` prints them, one a line). The old
// image refuses an upgrade to a binary that does not list its format.
const handoffFormat = "sessiond-handoff/1"

// handoffFormatRuntimes is the format of a handoff with shared runtimes
// (runtimes[], sessions naming their runtime): a binary that reads only
// handoffFormat would close their sessions as after a crash, so an
// upgrade with a live runtime is refused to it.
const handoffFormatRuntimes = "sessiond-handoff/2"

var HandoffFormats = []string{handoffFormat, handoffFormatRuntimes}

// handoffInotify is a feature of the new binary, printed by `version
// --handoff` after the formats: it reuses the inotify instance the
// handoff names (inotifyFd). Only to such a binary does the old image
// hand it over; to another it is closed by the exec as any other
// close-on-exec descriptor (an unknown field would leave it open in the
// new image, and in every child it starts).
const handoffInotify = handoffFeaturePrefix + "inotify"

// handoffFeaturePrefix starts a feature's line in `version --handoff`
// (the other lines are formats). A line is read to at most 32 bytes
// (api.Prefix): a feature's name fits.
const handoffFeaturePrefix = "sessiond-handoff+"

// HandoffFeatures are the handoff features this binary honours.
var HandoffFeatures = []string{handoffInotify}

// HandoffEnv names the file the new image adopts.
const HandoffEnv = "SESSIOND_HANDOFF"

// HandoffFile is the handoff's name in the state dir.
const HandoffFile = "upgrade-handoff.json"

// maxHandoffBytes bounds the file the new image reads (thousands of
// sessions with a 1 MiB cut line each would still fit).
const maxHandoffBytes = 256 << 20

type handoff struct {
	Format      string    `json:"format"`
	FromVersion string    `json:"fromVersion"`
	ToVersion   string    `json:"toVersion"` // what `version` of the new binary said
	PID         int       `json:"pid"`
	StateID     string    `json:"stateId"`
	WrittenAt   time.Time `json:"writtenAt"`
	// Listener is the listening socket's descriptor (inheritable) and
	// whether it came from systemd (then it is never unlinked).
	Listener handoffListener `json:"listener"`
	// StoreFD is the store's locked descriptor (inheritable): the new
	// image runs bbolt on the same open file, so the flock is held across
	// the exec and a second serve waiting for it never gets it.
	StoreFD int `json:"storeFd,omitempty"`
	// Caller is the connection that called daemon.upgrade: the new image
	// answers it there, once it accepts.
	Caller *handoffCaller `json:"caller,omitempty"`
	// NotifySocket is systemd's NOTIFY_SOCKET, removed from the
	// environment at start (no child inherits it) and restored for the
	// new image.
	NotifySocket string `json:"notifySocket,omitempty"`
	// CgroupBase is where sessiond-<stateId> is in cgroup mode: the new
	// image uses it as is (it may have moved itself into a leaf cgroup,
	// which changes "its own cgroup") and finds the children's cgroups.
	CgroupBase string `json:"cgroupBase,omitempty"`
	// InotifyFD is cgroup mode's inotify instance (inheritable), reused
	// by the new image: handed over only to a binary listing
	// handoffInotify.
	InotifyFD int                   `json:"inotifyFd,omitempty"`
	Sessions  []host.HandoffSession `json:"sessions"`
	// Runtimes are the live shared runtimes; their sessions are in
	// Sessions, each naming its runtime.
	Runtimes []host.HandoffRuntime `json:"runtimes,omitempty"`

	// consumed is where the new image moved the file it read (removed
	// once it accepts), "" when it was removed at once.
	consumed string
}

type handoffListener struct {
	FD        int    `json:"fd"`
	Socket    string `json:"socket"`
	Activated bool   `json:"activated,omitempty"`
}

type handoffCaller struct {
	FD      int             `json:"fd"`
	Framing string          `json:"framing"` // "lines" | "header"
	ID      json.RawMessage `json:"id"`
	// Serve: the new image serves the connection on (initialized, with
	// Caps) after the answer; without it (an older image wrote the
	// handoff) it answers and closes it.
	Serve bool     `json:"serve,omitempty"`
	Caps  []string `json:"caps,omitempty"`
	// Unread is what the old image had read from the connection and not
	// parsed (JSON base64): the new image reads it first.
	Unread []byte `json:"unread,omitempty"`
}

// handoffWrite bounds writing the handoff (a stalled disk refuses the
// upgrade; the daemon carries on).
const handoffWrite = 10 * time.Second

// writeHandoff writes h to the state dir (0600, fsynced) and returns its
// path: into a new file of its own (O_EXCL|O_NOFOLLOW: whatever sits at
// the path, a FIFO or a symlink, is neither opened nor followed) renamed
// over the handoff's name, within handoffWrite.
func writeHandoff(stateDir string, h *handoff) (string, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("handoff: %w", err)
	}
	path := filepath.Join(stateDir, HandoffFile)
	done := make(chan error, 1)
	go func() { done <- writeNew(path, b) }()
	t := time.NewTimer(handoffWrite)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return "", err
		}
		return path, nil
	case <-t.C:
		// If it still lands, the next start finds a handoff of a pid
		// that is not its own and ignores it.
		return "", fmt.Errorf("handoff: writing %s took longer than %s", path, handoffWrite)
	}
}

// writeNew writes b to a new temp file next to path and renames it there.
func writeNew(path string, b []byte) error {
	tmp := fmt.Sprintf("%s.%d.%d.tmp", path, os.Getpid(), time.Now().UnixNano())
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("handoff: %w", err)
	}
	// Not fsynced: only the next image of this boot reads it, through
	// the page cache, and a plain start removes a leftover one.
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("handoff: write %s: %w", path, err)
	}
	return nil
}

// consumedHandoff is where readHandoff moves the handoff it read: a name
// of this image's own, which neither a next handoff (written to path)
// nor the next image's consumed one takes.
func consumedHandoff(path string) string {
	return fmt.Sprintf("%s.%d.%d.consumed", path, os.Getpid(), time.Now().UnixNano())
}

// handoffTemp matches writeNew's temp files' names and consumed
// handoffs (consumedHandoff) left by an image that died before it
// accepted.
var handoffTemp = regexp.MustCompile(`^` + regexp.QuoteMeta(HandoffFile) + `\.[0-9]+\.[0-9]+\.(tmp|consumed)$`)

// removeHandoffTemps removes the temp files a handoff write left behind
// (an image killed while writing it). It runs with the store's flock held,
// so no other daemon writes one in stateDir meanwhile and this one writes
// none before it serves. Only regular files of this user with exactly
// writeNew's name pattern; never what a symlink points to; never keep
// (the handoff this image consumed: it is removed once it accepts).
func removeHandoffTemps(stateDir, keep string, log *slog.Logger) {
	ents, err := os.ReadDir(stateDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !handoffTemp.MatchString(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(stateDir, e.Name())
		if path == keep {
			continue
		}
		fi, err := os.Lstat(path)
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !fi.Mode().IsRegular() || !ok || int(st.Uid) != os.Getuid() {
			continue
		}
		if err := os.Remove(path); err == nil {
			log.Info("removed a live upgrade handoff's temp file (its image died while writing or adopting it)", "path", path)
		}
	}
}

// errHandoff means the handoff the new image was given is unusable.
var errHandoff = errors.New("unusable handoff")

// readHandoff reads the handoff at path and renames it out of the way
// (consumed: a later start must not adopt it again) to consumedHandoff,
// which the caller removes once it accepts (removing a file frees its
// blocks, and on a filesystem mounted with discard that waits for the
// device: 6 ms here, inside the upgrade's pause). It is removed at once
// when it cannot be renamed.
func readHandoff(path string) (*handoff, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errHandoff, err)
	}
	defer f.Close()
	consumed := consumedHandoff(path)
	if err := os.Rename(path, consumed); err != nil {
		os.Remove(path)
		consumed = ""
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errHandoff, err)
	}
	if fi.Size() > maxHandoffBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes (limit %d)", errHandoff, path, fi.Size(), maxHandoffBytes)
	}
	var h handoff
	if err := json.NewDecoder(f).Decode(&h); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errHandoff, path, err)
	}
	known := false
	for _, f := range HandoffFormats {
		known = known || f == h.Format
	}
	if !known {
		return nil, fmt.Errorf("%w: format %q, this binary reads %v", errHandoff, h.Format, HandoffFormats)
	}
	if h.PID != os.Getpid() {
		return nil, fmt.Errorf("%w: written by pid %d, this is %d", errHandoff, h.PID, os.Getpid())
	}
	h.consumed = consumed
	return &h, nil
}
