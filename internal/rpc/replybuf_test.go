package rpc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/internal/api"
	"github.com/sessiond/sessiond/internal/event"
)

// TestPooledReplyBuffersNotShared: read replies reuse their buffers once
// written; connections reading side by side each get exactly their own
// pages, every time (a buffer handed back before its write finished
// would carry another page's bytes, and -race sees the write overlap).
func TestPooledReplyBuffersNotShared(t *testing.T) {
	fake := newFake()
	fake.readHook = func(p api.ReadParams) api.ReadResult {
		evs := make([]event.Event, 200)
		for i := range evs {
			evs[i] = event.Event{SessionID: p.SessionID, Seq: p.AfterSeq + uint64(i) + 1, Type: event.MessageDelta,
				Data: json.RawMessage(`{"text":"` + p.SessionID + `"}`)}
		}
		return api.ReadResult{Events: evs, LastSeq: p.AfterSeq + 200, HasMore: true}
	}
	ts := startServer(t, fake, nil)
	const conns, reads = 4, 40
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	for k := range conns {
		nc, err := net.Dial("unix", ts.path)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- readPages(nc, fmt.Sprintf("s_%08d", k), reads)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// readPages reads n pages of sid one after the other and checks each.
func readPages(nc net.Conn, sid string, n int) error {
	br := bufio.NewReaderSize(nc, 1<<16)
	if _, err := nc.Write([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"capabilities":["agent-session.attach.v1"]}}` + "\n")); err != nil {
		return err
	}
	if _, err := br.ReadBytes('\n'); err != nil {
		return err
	}
	for i := 1; i <= n; i++ {
		after := uint64(i * 1000)
		req := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"agentSession.read","params":{"sessionId":"` + sid +
			`","afterSeq":` + strconv.FormatUint(after, 10) + `}}` + "\n"
		if _, err := nc.Write([]byte(req)); err != nil {
			return err
		}
		line, err := br.ReadBytes('\n')
		if err != nil {
			return err
		}
		var resp struct {
			ID     int            `json:"id"`
			Result api.ReadResult `json:"result"`
		}
		if err := json.Unmarshal(line, &resp); err != nil {
			return fmt.Errorf("%s page %d: %w: %.200s", sid, i, err, line)
		}
		if resp.ID != i || len(resp.Result.Events) != 200 || resp.Result.LastSeq != after+200 {
			return fmt.Errorf("%s page %d: id %d, %d events, lastSeq %d: %.200s", sid, i, resp.ID, len(resp.Result.Events), resp.Result.LastSeq, line)
		}
		for j, ev := range resp.Result.Events {
			if ev.SessionID != sid || ev.Seq != after+uint64(j)+1 || string(ev.Data) != `{"text":"`+sid+`"}` {
				return fmt.Errorf("%s page %d event %d: %+v", sid, i, j, ev)
			}
		}
	}
	return nil
}
