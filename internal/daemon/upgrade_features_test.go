package daemon

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
)

// TestHandoffFeaturesFitTheCheck: the old image reads each line of
// `version --handoff` cut to api.EchoPrefixBytes, so a feature's name
// must fit whole (a longer one would never be recognised, and its
// feature silently never used), and must start with the feature prefix
// (else it would be read as a format).
func TestHandoffFeaturesFitTheCheck(t *testing.T) {
	for _, f := range HandoffFeatures {
		if api.Prefix(f) != f {
			t.Errorf("feature %q is longer than the %d bytes of a line the check reads", f, api.EchoPrefixBytes)
		}
		if !strings.HasPrefix(f, handoffFeaturePrefix) {
			t.Errorf("feature %q does not start with %q", f, handoffFeaturePrefix)
		}
	}
	for _, f := range HandoffFormats {
		if strings.HasPrefix(f, handoffFeaturePrefix) || api.Prefix(f) != f {
			t.Errorf("format %q would be read as a feature or cut", f)
		}
	}
}
