package dbustest

import (
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// serve answers the method calls c receives with handle's reply (nil:
// none, ever), then runs its after (nil: nothing) once the reply is
// written. It reads raw messages (Eavesdrop) rather than exporting an object: an exported
// method's reply is written after the method returns, and Login1 must
// close its copy of a descriptor only once the reply carrying it is out.
func serve(t testing.TB, c *dbus.Conn, handle func(*dbus.Message) (*dbus.Message, func())) {
	ch := make(chan *dbus.Message, 256)
	c.Eavesdrop(ch)
	done := make(chan struct{})
	t.Cleanup(func() { c.Close(); <-done })
	go func() {
		defer close(done)
		for m := range ch {
			if m.Type != dbus.TypeMethodCall {
				continue
			}
			out, after := handle(m)
			if out != nil && m.Flags&dbus.FlagNoReplyExpected == 0 { // nil: never answered
				c.Send(out, nil)
			}
			if after != nil {
				after()
			}
		}
	}()
}

func member(m *dbus.Message) string {
	iface, _ := m.Headers[dbus.FieldInterface].Value().(string)
	name, _ := m.Headers[dbus.FieldMember].Value().(string)
	return iface + "." + name
}

// reply is the method return for m with body.
func reply(m *dbus.Message, body ...any) *dbus.Message {
	out := &dbus.Message{Type: dbus.TypeMethodReply, Flags: dbus.FlagNoAutoStart,
		Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldReplySerial: dbus.MakeVariant(m.Serial()),
		}, Body: body}
	if s, ok := m.Headers[dbus.FieldSender]; ok {
		out.Headers[dbus.FieldDestination] = s
	}
	if len(body) > 0 {
		out.Headers[dbus.FieldSignature] = dbus.MakeVariant(dbus.SignatureOf(body...))
	}
	return out
}

// errorReply is the error return for m.
func errorReply(m *dbus.Message, name, text string) *dbus.Message {
	out := reply(m, text)
	out.Type = dbus.TypeError
	out.Headers[dbus.FieldErrorName] = dbus.MakeVariant(name)
	return out
}

func timeout() <-chan time.Time { return time.After(within) }
