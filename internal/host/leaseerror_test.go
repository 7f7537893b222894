package host

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/lease"
)

// TestLeaseErrorKinds: lease's own errors become the wire's kinds in one
// place, with the data clients match on.
func TestLeaseErrorKinds(t *testing.T) {
	owned := fmt.Errorf("acquire: %w", &lease.OwnedError{SessionID: "s1", PID: 31})
	for _, tc := range []struct {
		name string
		err  error
		want *api.Error
		data func(map[string]any) bool
	}{
		{"owned", owned, api.ErrSessionOwned, func(d map[string]any) bool { return d["pid"] == 31 }},
		{"unverifiable", lease.ErrUnverifiable, api.ErrSessionOwned, func(d map[string]any) bool { return d["owner"] == "unverifiable" }},
		{"stale fence", fmt.Errorf("commit: %w", lease.ErrStaleFence), api.ErrStaleFence, func(map[string]any) bool { return true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := leaseError("s1", tc.err)
			var ae *api.Error
			if !errors.Is(err, tc.want) || !errors.As(err, &ae) || !tc.data(ae.Data) {
				t.Fatalf("leaseError(%v) = %#v", tc.err, err)
			}
		})
	}
	if err := leaseError("s1", lease.ErrBadRecord); errors.As(err, new(*api.Error)) {
		t.Fatalf("a storage fault became a wire kind: %v", err)
	}
}
