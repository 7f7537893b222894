package e2e

import (
	"bufio"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// heldProxy stands between ctl and a daemon: its first connection passes
// the handshake's answer, then holds every later byte from the daemon
// until release is closed (to ctl, a daemon busy on that connection);
// every later connection passes straight through, and each one's end is
// sent on ended.
type heldProxy struct {
	socket  string
	held    chan struct{} // closed once the first connection's handshake answer passed
	release chan struct{}
	ended   chan struct{}
}

func startHeldProxy(t *testing.T, daemonSocket string) *heldProxy {
	t.Helper()
	dir, err := os.MkdirTemp("", "px")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &heldProxy{socket: filepath.Join(dir, "s"), held: make(chan struct{}), release: make(chan struct{}), ended: make(chan struct{}, 64)}
	l, err := net.Listen("unix", p.socket)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		select {
		case <-p.release:
		default:
			close(p.release)
		}
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			cc, err := l.Accept()
			if err != nil {
				return
			}
			dc, err := net.Dial("unix", daemonSocket)
			if err != nil {
				cc.Close()
				continue
			}
			mu.Lock()
			open = append(open, cc, dc)
			mu.Unlock()
			first := n == 0
			wg.Add(2)
			go func() {
				defer wg.Done()
				io.Copy(dc, cc)
				dc.(*net.UnixConn).CloseWrite()
			}()
			go func() {
				defer wg.Done()
				defer cc.Close()
				var from io.Reader = dc
				if first {
					br := bufio.NewReader(dc)
					line, err := br.ReadBytes('\n')
					if err != nil {
						return
					}
					cc.Write(line)
					close(p.held)
					<-p.release
					from = br
				}
				io.Copy(cc, from)
				if !first {
					p.ended <- struct{}{}
				}
			}()
		}
	}()
	return p
}

// TestE2ECtlBusyNotHung: a daemon that answers new connections is not
// called hung because the command's own connection is slow to answer (a
// busy daemon building a large reply; here a proxy holding that
// connection's answers): `ctl ls` waits through several rounds of the
// probe, each made on a new connection once the one on its own connection
// goes unanswered, longer than the 15 s an unanswered probe is given, and
// lists the sessions once the answer comes. (A daemon that answers no new
// connection is still reported: TestE2ECtlStoppedDaemon.)
func TestE2ECtlBusyNotHung(t *testing.T) {
	d := daemontest.Start(t, daemontest.Options{})
	ids := createN(t, d.Client(t), 3, t.TempDir())
	px := startHeldProxy(t, d.Socket)
	ls := startCtl(t, px.socket, "ls")
	select {
	case <-px.held:
	case <-ls.exited:
		t.Fatalf("ctl ls exited %d before its handshake passed:\n%s", ls.code, ls.output())
	}
	// Four probes on new connections: the last comes about 25 s in, past
	// the 5 s + 15 s after which a probe on the held connection alone
	// called the daemon hung.
	for i := range 4 {
		select {
		case <-px.ended:
		case <-ls.exited:
			t.Fatalf("ctl ls exited %d after %d probes on new connections, while the daemon answered them:\n%s", ls.code, i, ls.output())
		case <-time.After(60 * time.Second):
			t.Fatalf("no probe on a new connection from ctl ls in 60 s (%d so far):\n%s", i, ls.output())
		}
	}
	close(px.release)
	select {
	case <-ls.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("ctl ls still runs after its answer was let through:\n%s", ls.output())
	}
	out := ls.output()
	if ls.code != 0 || strings.Contains(out, "did not answer") {
		t.Fatalf("ctl ls: exit %d, want 0 and the listing:\n%s", ls.code, out)
	}
	for _, id := range ids {
		if !strings.Contains(out, id) {
			t.Errorf("ctl ls does not list %s:\n%s", id, out)
		}
	}
}
