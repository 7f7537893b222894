package codex

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/event"
)

// BenchmarkAdapterDeltas: provider lines -> emitted message.delta drafts,
// through a pipe, per delta line (64-byte deltas).
func BenchmarkAdapterDeltas(b *testing.B) {
	line := `{"method":"item/agentMessage/delta","params":{"threadId":"thr_1","turnId":"pt","itemId":"i","delta":"` + strings.Repeat("d", 64) + `"}}` + "\n"
	pr, pw := io.Pipe()
	got := make(chan struct{}, 1024)
	a := NewAdapter(Options{In: nopWriteCloser{io.Discard}, Out: pr, Emit: func(event.Draft) { got <- struct{}{} }})
	a.mu.Lock()
	a.threadID, a.turn = "thr_1", &openTurn{ours: "t_1", provider: "pt"}
	a.mu.Unlock()
	go func() {
		chunk := strings.Repeat(line, 64)
		for i := 0; i < b.N; i += 64 {
			_, _ = io.WriteString(pw, chunk)
		}
		_ = pw.Close()
	}()
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	for range b.N {
		<-got
	}
	b.StopTimer()
	go func() {
		for range got {
		}
	}()
	<-a.Done()
	close(got)
}

// BenchmarkBaselineDecode is the floor for BenchmarkAdapterDeltas: the same
// lines read and JSON-decoded with no adapter around them.
func BenchmarkBaselineDecode(b *testing.B) {
	line := `{"method":"item/agentMessage/delta","params":{"threadId":"thr_1","turnId":"pt","itemId":"i","delta":"` + strings.Repeat("d", 64) + `"}}` + "\n"
	r := strings.NewReader(strings.Repeat(line, b.N))
	lr := newLineReader(r, DefaultMaxLineBytes)
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	for range b.N {
		l, err := lr.Next()
		if err != nil {
			b.Fatal(err)
		}
		var m message
		var n turnNote
		if json.Unmarshal(l, &m) != nil || json.Unmarshal(m.Params, &n) != nil {
			b.Fatal("decode")
		}
	}
}

// BenchmarkEchoFlood: a real echo child floods one turn of b.N deltas;
// the time is per delta, end to end (echo encode, pipe, adapter, Emit).
func BenchmarkEchoFlood(b *testing.B) {
	for _, size := range []int{8, 1024} {
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) {
			a, _, rec := newEchoAdapter(b, b.TempDir(), "")
			ctx := testCtx(b)
			if _, err := a.Start(ctx); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			b.ResetTimer()
			if err := a.StartTurn(ctx, "t_1", fmt.Sprintf("/flood %d %d", b.N, size)); err != nil {
				b.Fatal(err)
			}
			rec.waitFor(b, event.TurnCompleted, "t_1")
		})
	}
}
