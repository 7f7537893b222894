package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// ErrCopyInUse means the state directory is a copy (cp -a, a restored
// backup) of one a running sessiond holds: both carry the same state id,
// so the copy's startup reap would take the other daemon's providers
// (their tags and cgroup name are the state id's).
var ErrCopyInUse = errors.New("this state directory is a copy of one a running sessiond uses")

// keyHome is meta/home: where the store was created or last adopted.
var keyHome = []byte("home")

// home is the store file's identity: absolute path, device and inode.
type home struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

func homeOf(path string) (home, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return home{}, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return home{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return home{Path: abs}, nil
	}
	return home{Path: abs, Dev: uint64(st.Dev), Ino: uint64(st.Ino)}, nil
}

// checkHome compares the file's identity with the one recorded. Same, or
// none recorded yet: it records it. Different: the store was copied or
// moved. If the recorded file is still there (same device and inode) and
// a sessiond holds its flock, this is a copy of a store in use: refused
// with ErrCopyInUse before anything is written. Otherwise (moved, or a
// copy of a store no daemon runs on) the new identity is recorded and a
// warning names the old path. It returns that warning ("" for none).
func (s *Store) checkHome() (string, error) {
	cur, err := homeOf(s.Path)
	if err != nil {
		return "", fmt.Errorf("identity of %s: %w", s.Path, err)
	}
	var rec home
	var had bool
	s.DB.View(func(tx *bolt.Tx) error {
		if m := tx.Bucket(BucketMeta); m != nil {
			if b := m.Get(keyHome); b != nil {
				had = json.Unmarshal(b, &rec) == nil
			}
		}
		return nil
	})
	if had && rec == cur {
		return "", nil
	}
	warning := ""
	if had {
		if inUse(rec) {
			return "", fmt.Errorf("%w: the original %s (state id %s) is locked by a running sessiond; "+
				"start this copy only once that daemon is stopped, or give it a fresh state directory",
				ErrCopyInUse, filepath.Dir(rec.Path), s.StateID)
		}
		warning = fmt.Sprintf("the store was moved or copied from %s (no sessiond runs there); it now lives at %s", filepath.Dir(rec.Path), filepath.Dir(cur.Path))
	}
	b, _ := json.Marshal(cur)
	err = s.DB.Update(func(tx *bolt.Tx) error {
		m, err := tx.CreateBucketIfNotExists(BucketMeta)
		if err != nil {
			return err
		}
		return m.Put(keyHome, b)
	})
	return warning, err
}

// inUse reports whether the recorded store file is still where it was
// (same device and inode) and a sessiond holds its flock.
func inUse(rec home) bool {
	f, err := os.Open(rec.Path)
	if errors.Is(err, fs.ErrNotExist) || err != nil {
		return false
	}
	defer f.Close()
	now, err := homeOf(rec.Path)
	if err != nil || now.Dev != rec.Dev || now.Ino != rec.Ino {
		return false
	}
	// shared: a daemon's exclusive lock refuses it, a reader's does not
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return false
	}
	return errors.Is(err, unix.EWOULDBLOCK)
}
