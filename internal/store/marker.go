package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// marker is <state-dir>/sessiond.db.created: written when the store is
// created (or first opened by a sessiond that writes it), it is what tells
// a lost store from a state directory never used.
type marker struct {
	StateID   string    `json:"stateId"`
	CreatedAt time.Time `json:"createdAt"`
	// Replaces lists the files moved aside (sessiond.db.corrupt-…,
	// sessiond.db.lost-…) that were there when this store was created.
	Replaces []string `json:"replaces,omitempty"`
}

// readMarker returns the marker (ok false if there is none). A marker that
// does not decode still shows earlier use: it comes back empty.
func readMarker(dir string) (m marker, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, markerName))
	if errors.Is(err, fs.ErrNotExist) {
		return marker{}, false, nil
	}
	if err != nil {
		return marker{}, false, err
	}
	json.Unmarshal(b, &m) // a damaged marker is evidence all the same
	return m, true, nil
}

// writeMarker replaces the marker atomically (temp file, fsync, rename,
// fsync of the directory).
func writeMarker(dir string, m marker) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+markerName+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("marker: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, markerName))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("marker %s: %w", filepath.Join(dir, markerName), err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// MarkerStateID returns the state id the marker of dir records ("" if
// none): doctor's way to find a broken store's processes.
func MarkerStateID(dir string) string {
	m, _, _ := readMarker(dir)
	return m.StateID
}

// usedBefore names the evidence that dir held a store ("" for none): the
// marker, or a non-empty providers/ directory (provider homes live there;
// a state dir from before the marker has no other trace).
func usedBefore(dir string) (evidence string, m marker, err error) {
	m, ok, err := readMarker(dir)
	if err != nil {
		return "", m, err
	}
	if ok {
		return "the marker " + filepath.Join(dir, markerName) + " exists", m, nil
	}
	providers := filepath.Join(dir, "providers")
	if ents, err := os.ReadDir(providers); err == nil && len(ents) > 0 {
		return "the provider directory " + providers + " exists", m, nil
	}
	return "", m, nil
}

// asides lists the files of dir moved aside under one of the aside names.
func asides(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, corruptAside) || strings.HasPrefix(n, lostAside) {
			out = append(out, n)
		}
	}
	return out, nil
}

// freshStart decides whether an empty store may be created where
// sessiond.db is missing (empty false) or has zero length (empty true).
// It returns the asides the new store replaces and, for a start after the
// operator moved the old one aside, a warning naming it; or a refusal.
func freshStart(dir, path string, empty bool) (replaces []string, warning string, err error) {
	evidence, m, err := usedBefore(dir)
	if err != nil {
		return nil, "", fmt.Errorf("state dir %s: %w", dir, err)
	}
	all, err := asides(dir)
	if err != nil {
		return nil, "", fmt.Errorf("state dir %s: %w", dir, err)
	}
	if evidence == "" {
		return all, "", nil
	}
	if empty {
		return nil, "", &RefusalError{Path: path, Kind: ErrLost, Fix: fixMoveAside(path),
			Reason: "it is empty (0 bytes) but " + evidence}
	}
	var acked []string
	for _, a := range all {
		if !slices.Contains(m.Replaces, a) {
			acked = append(acked, filepath.Join(dir, a))
		}
	}
	if len(acked) == 0 {
		return nil, "", &RefusalError{Path: path, Kind: ErrLost, Fix: fixLost(path),
			Reason: "it is missing but " + evidence}
	}
	return all, fmt.Sprintf("%s was missing and %s: starting a new, empty store (the old one was moved aside: %s)",
		path, evidence, strings.Join(acked, ", ")), nil
}
