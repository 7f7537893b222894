package ctl

import (
	"fmt"
	"strings"

	"github.com/sessiond/sessiond/internal/api"
)

// doctorSupervision reports the daemon's supervision mode and why, with
// every configured limit it does not enforce.
func doctorSupervision(s api.Supervision) DoctorCheck {
	d := fmt.Sprintf("%s mode: %s", s.Mode, s.Reason)
	if s.Mode == "cgroup" {
		d += fmt.Sprintf("; cgroup %s, controllers [%s], cgroup.kill %v", s.Cgroup, strings.Join(s.Controllers, " "), s.CgroupKill)
	}
	if s.MemoryMax > 0 {
		d += fmt.Sprintf("; memory.max %d", s.MemoryMax)
	}
	if s.PidsMax > 0 {
		d += fmt.Sprintf("; pids.max %d", s.PidsMax)
	}
	for _, n := range s.Notes {
		d += "; " + n
	}
	return DoctorCheck{Name: "supervision", Detail: d}
}
