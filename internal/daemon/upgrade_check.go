package daemon

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/proc"
)

// maxVersionOutput bounds what the new binary's `version` and `version
// --handoff` may print.
const maxVersionOutput = 64 << 10

// handoffVersionPrefix starts the line of `version --handoff` that says
// the binary's version (what `version` prints after "sessiond "): with
// it the check runs the new binary once, not twice (a start of the new
// binary is most of the check's time). A binary without it is asked
// `version` as well. An image that predates the line reads it as a
// format it does not know, harmlessly.
const handoffVersionPrefix = "version "

// HandoffVersionLine is the line of `version --handoff` that says v.
func HandoffVersionLine(v string) string { return handoffVersionPrefix + v }

// newBinary is what checkBinary learnt of the new binary: its version,
// the handoff formats it reads and the handoff features it honours.
type newBinary struct {
	version           string
	formats, features []string
}

// checkBinary runs `<bin> version --handoff` and, when its output does
// not say the version, `<bin> version`: the new binary must be
// executable and read this binary's handoff format. It returns the new
// binary's version, the handoff formats it reads and the features it
// honours (lines starting handoffFeaturePrefix).
func checkBinary(ctx context.Context, bin string) (newBinary, error) {
	fi, err := os.Stat(bin)
	if err != nil {
		return newBinary{}, refuse("binary "+quoteBin(bin), err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return newBinary{}, refuse(fmt.Sprintf("binary %s is not an executable file (mode %v)", quoteBin(bin), fi.Mode()), nil)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := proc.Output(ctx, maxVersionOutput, bin, "version", "--handoff")
	if err != nil {
		return newBinary{}, refuse(fmt.Sprintf("%s version --handoff failed (a binary without live upgrade?)", quoteBin(bin)), err)
	}
	nb := newBinary{formats: []string{}}
	versioned := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for n := 0; sc.Scan() && n < 16; n++ {
		raw := strings.TrimSpace(sc.Text())
		line := api.Prefix(raw)
		switch {
		case strings.HasPrefix(raw, handoffVersionPrefix):
			nb.version, versioned = api.Truncate(strings.TrimSpace(strings.TrimPrefix(raw, handoffVersionPrefix)), api.EchoPrefixBytes*4), true
		case strings.HasPrefix(line, handoffFeaturePrefix):
			nb.features = append(nb.features, line)
		default:
			nb.formats = append(nb.formats, line)
		}
	}
	if err := sc.Err(); err != nil {
		return newBinary{}, refuse(fmt.Sprintf("%s version --handoff", quoteBin(bin)), err)
	}
	ok := false
	for _, f := range nb.formats {
		ok = ok || f == handoffFormat
	}
	if !ok {
		return newBinary{}, refuse(fmt.Sprintf("%s reads handoff formats %v, not %s", quoteBin(bin), nb.formats, handoffFormat), nil)
	}
	if versioned {
		return nb, nil
	}
	vout, err := proc.Output(ctx, maxVersionOutput, bin, "version")
	if err != nil {
		return newBinary{}, refuse(fmt.Sprintf("%s version failed", quoteBin(bin)), err)
	}
	nb.version = api.Prefix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(vout)), "sessiond ")))
	return nb, nil
}
