package config

import "fmt"

// Notify modes (notify): NotifyNone posts nothing, NotifyDesktop a desktop
// notification when no surface is attached to the session.
const (
	NotifyNone    = "none"
	NotifyDesktop = "desktop"
)

// Defaults of the attention keys (PROTOCOL.md "Attention").
const (
	DefaultKeepAwake = true
	DefaultNotify    = NotifyNone
)

// applyAttention checks and applies keep_awake (its type is checked by the
// schema) and notify.
func applyAttention(f file, c *Config) error {
	if f.KeepAwake != nil {
		c.KeepAwake = *f.KeepAwake
	}
	if f.Notify != nil {
		switch n := *f.Notify; n {
		case NotifyNone, NotifyDesktop:
			c.Notify = n
		default:
			return fmt.Errorf("%w: notify = %q: want %q or %q", ErrBadValue, prefix(n), NotifyNone, NotifyDesktop)
		}
	}
	return nil
}
