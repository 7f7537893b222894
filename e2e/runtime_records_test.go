package e2e

import (
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/store"
)

// runtimeRecords reads the runtime records of a stopped daemon's store.
func runtimeRecords(t *testing.T, stateDir string) []store.RuntimeRecord {
	t.Helper()
	st, err := store.OpenReadOnly(stateDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.ListRuntimes(func(id string, err error) { t.Errorf("runtime record %s: %v", id, err) })
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
