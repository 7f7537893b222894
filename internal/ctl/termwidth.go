package ctl

import (
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/width"

	"github.com/sessiond/sessiond/internal/tty"
)

// A table row must stay one line of a sensible width whatever a client or
// provider put in a title, cwd or holder id. fit and fitTail escape a value
// (tty.Safe) and shorten it to a number of terminal cells with "…";
// table aligns columns by those cells (text/tabwriter counts runes, so a
// wide character would push the rest of its row out of line).

// cellWidth is how many terminal cells r takes: 0 for combining marks and
// invisible format characters, 2 for East Asian Wide (W) and Fullwidth (F)
// characters (Unicode's EastAsianWidth.txt, through x/text/width; the emoji
// terminals draw wide are W there), else 1 (ambiguous ones included).
func cellWidth(r rune) int {
	switch {
	case r < 0x300:
		return 1
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		return 0
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	default:
		return 1
	}
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
