package ctl

import (
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sessiond/sessiond/internal/tty"
)

// A table row must stay one line of a sensible width whatever a client or
// provider put in a title, cwd or holder id. fit and fitTail escape a value
// (tty.Safe) and shorten it to a number of terminal cells with "…";
// table aligns columns by those cells (text/tabwriter counts runes, so a
// wide character would push the rest of its row out of line).

// cellWidth is how many terminal cells r takes: 0 for combining marks and
// invisible format characters, 2 for East Asian wide and fullwidth
// characters (and the emoji blocks terminals draw wide), else 1.
func cellWidth(r rune) int {
	switch {
	case r < 0x300:
		return 1
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		return 0
	case wide(r):
		return 2
	default:
		return 1
	}
}

// wide reports the East Asian Wide (W) and Fullwidth (F) ranges of
// Unicode's EastAsianWidth.txt, folded into blocks.
func wide(r rune) bool {
	switch {
	case r < 0x1100:
		return false
	case r <= 0x115f, // Hangul Jamo leading consonants
		r >= 0x231a && r <= 0x231b, r >= 0x2329 && r <= 0x232a, r >= 0x23e9 && r <= 0x23ec,
		r >= 0x2e80 && r <= 0x303e,                             // CJK radicals, Kangxi, CJK symbols and punctuation
		r >= 0x3041 && r <= 0x33ff,                             // kana, bopomofo, Hangul compatibility, CJK compatibility
		r >= 0x3400 && r <= 0x4dbf,                             // CJK extension A
		r >= 0x4e00 && r <= 0x9fff,                             // CJK unified ideographs
		r >= 0xa000 && r <= 0xa4cf,                             // Yi
		r >= 0xa960 && r <= 0xa97f,                             // Hangul Jamo extended A
		r >= 0xac00 && r <= 0xd7a3,                             // Hangul syllables
		r >= 0xf900 && r <= 0xfaff,                             // CJK compatibility ideographs
		r >= 0xfe10 && r <= 0xfe19, r >= 0xfe30 && r <= 0xfe6f, // vertical forms, small forms
		r >= 0xff00 && r <= 0xff60, r >= 0xffe0 && r <= 0xffe6, // fullwidth forms
		r >= 0x1f300 && r <= 0x1f64f, r >= 0x1f900 && r <= 0x1f9ff, // emoji
		r >= 0x20000 && r <= 0x3fffd: // CJK extensions B and later
		return true
	}
	return false
}

// displayWidth is the cells s takes on a terminal (s already escaped).
func displayWidth(s string) int {
	n := 0
	for _, r := range s {
		n += cellWidth(r)
	}
	return n
}

// escapedUnits splits s into what tty.Safe prints for each of its runes
// (an escape such as \x1b is one unit: a cut never splits it, nor a UTF-8
// sequence) with each unit's width.
func escapedUnits(s string) (units []string, widths []int) {
	for i := 0; i < len(s); {
		_, size := utf8.DecodeRuneInString(s[i:])
		u := tty.Safe(s[i : i+size])
		units, widths = append(units, u), append(widths, displayWidth(u))
		i += size
	}
	return units, widths
}

// fit is tty.Safe(s) in at most max cells: cut at the end with "…".
func fit(s string, max int) string {
	if tty.IsSafe(s) && len(s) <= max && utf8.RuneCountInString(s) == len(s) {
		return s // short ASCII, the common case
	}
	units, widths := escapedUnits(s)
	if sum(widths) <= max {
		return strings.Join(units, "")
	}
	var b strings.Builder
	for i, n := 0, 0; i < len(units) && n+widths[i] <= max-1; i++ {
		b.WriteString(units[i])
		n += widths[i]
	}
	return b.String() + "…"
}

// fitTail is tty.Safe(s) in at most max cells: cut at the start with "…",
// for paths, whose end says most.
func fitTail(s string, max int) string {
	units, widths := escapedUnits(s)
	if sum(widths) <= max {
		return strings.Join(units, "")
	}
	start, n := len(units), 0
	for start > 0 && n+widths[start-1] <= max-1 {
		start--
		n += widths[start]
	}
	return "…" + strings.Join(units[start:], "")
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// table is rows of cells aligned by display width, two spaces between
// columns; the last cell of a row is not padded.
type table struct{ rows [][]string }

func (t *table) add(cells ...string) {
	if len(cells) > 0 {
		t.rows = append(t.rows, cells)
	}
}

func (t *table) write(w io.Writer) error {
	var widths []int
	for _, row := range t.rows {
		for i, c := range row[:len(row)-1] {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], displayWidth(c))
		}
	}
	var b strings.Builder
	for _, row := range t.rows {
		for i, c := range row {
			b.WriteString(c)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-displayWidth(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
