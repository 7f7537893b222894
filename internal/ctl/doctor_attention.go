package ctl

import (
	"fmt"

	"github.com/sessiond/sessiond/internal/api"
)

// doctorKeepAwake reports keep-awake and notify. An unavailable inhibitor
// is said, with what to do, but is no problem (exit 0): turns run as
// well, and a headless machine has no logind to ask.
func doctorKeepAwake(at *api.AttentionStatus) DoctorCheck {
	c := DoctorCheck{Name: "keep-awake"}
	switch {
	case at == nil:
		c.Detail = "not reported by this daemon"
	case at.KeepAwake.Reason == "keep_awake = false":
		c.Detail = "off (keep_awake = false); notify " + at.Notify
	case !at.KeepAwake.Active:
		c.Detail = fmt.Sprintf("UNAVAILABLE: %s; turns still run but the machine may sleep during one "+
			"(run systemd-logind, or set keep_awake = false to silence this); notify %s", at.KeepAwake.Reason, at.Notify)
	default:
		c.Detail = fmt.Sprintf("available, inhibitor held %v; notify %s", at.KeepAwake.Held, at.Notify)
	}
	return c
}
