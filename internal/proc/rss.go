package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSS is pid's resident set size in bytes, read from /proc/PID/statm
// (resident pages × the page size). It counts file pages shared with
// other processes in full: for what one more process costs, its PSS
// (/proc/PID/smaps_rollup) is the figure.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0, fmt.Errorf("rss of pid %d: %w", pid, err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("rss of pid %d: /proc/%d/statm has %d fields", pid, pid, len(f))
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("rss of pid %d: %w", pid, err)
	}
	return pages * int64(os.Getpagesize()), nil
}
