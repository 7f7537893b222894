package rpc

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"

	berrors "go.etcd.io/bbolt/errors"
)

// TestUnmappedStoreOnTheWire: bbolt's errors of a store it cannot use
// (unmapped after an EIO, its mapping failing to grow), however a call
// site wrapped them, reach the wire as store_unavailable (-32027) with
// the cause, not internal_error.
func TestUnmappedStoreOnTheWire(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("session s_1: %w", berrors.ErrInvalidMapping),
		fmt.Errorf("read: mmap allocate error: %s", syscall.EIO),
	} {
		w := toWire(err)
		var d map[string]any
		if w.Data != nil {
			json.Unmarshal(*w.Data, &d)
		}
		if w.Code != -32027 || d["reason"] != "store_unavailable" || d["cause"] != err.Error() {
			t.Fatalf("%v: code %d data %v, want store_unavailable with the cause", err, w.Code, d)
		}
	}
}
