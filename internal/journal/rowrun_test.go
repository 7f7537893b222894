package journal

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sessiond/sessiond/internal/event"
)

// TestRowRunDecodesAsAlone: a read decodes its rows one after the other
// with one rowReader, which compares each row's session, time, type and
// turn with the last ones it saw before scanning them; every row of a run
// (fields repeating, changing, one a prefix of another, with escapes)
// must read as encoding/json reads it, with the row itself as Raw when it
// agrees with its key.
func TestRowRunDecodesAsAlone(t *testing.T) {
	base := time.Date(2026, 11, 30, 17, 16, 11, 123456789, time.UTC)
	ats := []time.Time{base, base.Add(time.Nanosecond), base.Add(-123456789), base.Add(time.Hour), base.Truncate(time.Microsecond)}
	ids := []string{"s_1", "s_12", "s_", `s"1`, `s\1`, ""}
	types := []string{event.MessageDelta, event.TurnStarted, "message.delta.x", "message", "x.\u00e9<y>", "t\"q"}
	turns := []string{"", "t_1", "t_12", "t_", "t\\n\n", "t\"1"}
	datas := []string{"", `{"text":"hi"}`, `{"text":"a\"b\\c","n":[1,{"x":null}]}`, `"str"`, `null`}
	rapid.Check(t, func(t *rapid.T) {
		readID := rapid.SampledFrom(ids).Draw(t, "readID")
		n := rapid.IntRange(1, 12).Draw(t, "n")
		rr := rowReader{validate: rapid.Bool().Draw(t, "validate")}
		for i := range n {
			ev := event.Event{
				SessionID: readID,
				Seq:       uint64(i + 1),
				At:        rapid.SampledFrom(ats).Draw(t, "at"),
				Type:      rapid.SampledFrom(types).Draw(t, "type"),
				TurnID:    rapid.SampledFrom(turns).Draw(t, "turn"),
			}
			if rapid.IntRange(0, 4).Draw(t, "otherID") == 0 {
				ev.SessionID = rapid.SampledFrom(ids).Draw(t, "sid")
			}
			if d := rapid.SampledFrom(datas).Draw(t, "data"); d != "" {
				ev.Data = json.RawMessage(d)
			}
			seq := ev.Seq
			if rapid.IntRange(0, 5).Draw(t, "otherSeq") == 0 {
				seq += 1 << 40
			}
			row := event.AppendJSON(nil, &ev)
			// What the row says, by encoding/json; Raw is the row itself
			// when it agrees with its key, else the event re-encoded.
			var want event.Event
			werr := json.Unmarshal(row, &want)
			want.Raw = row
			if want.Seq != seq || want.SessionID != readID {
				want.Seq, want.SessionID, want.Raw = seq, readID, nil
				want.Raw = event.AppendJSON(nil, &want)
			}
			got, gerr := rr.event(readID, seq, row)
			if werr != nil || gerr != nil || got.SessionID != want.SessionID || got.Seq != want.Seq ||
				!got.At.Equal(want.At) || got.Type != want.Type || got.TurnID != want.TurnID ||
				!bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Raw, want.Raw) {
				t.Fatalf("row %d %s read in a run: %+v (%v); want %+v (%v)", i, row, got, gerr, want, werr)
			}
		}
	})
}

// TestDecodeSeqOverflow: a seq past uint64 is no event (the fast path
// parses digits itself and must not wrap around).
func TestDecodeSeqOverflow(t *testing.T) {
	for _, seq := range []string{"18446744073709551616", "99999999999999999999", "184467440737095516150"} {
		row := `{"sessionId":"s","seq":` + seq + `,"at":"2026-11-30T17:16:11Z","type":"message.delta"}`
		if ev, err := decodeEvent([]byte(row)); err == nil {
			t.Errorf("seq %s read as %d, want an error", seq, ev.Seq)
		}
	}
	if ev, err := decodeEvent([]byte(`{"sessionId":"s","seq":18446744073709551615,"at":"2026-11-30T17:16:11Z","type":"message.delta"}`)); err != nil || ev.Seq != 1<<64-1 {
		t.Errorf("the largest seq: %d, %v", ev.Seq, err)
	}
}
