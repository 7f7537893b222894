package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// A JSON structure walker for the replay figure's lean client: it walks a
// whole response once, allocating nothing, and keeps only what the replay
// needs: the id, whether there is an error, and of result the number of
// elements of events, the last element's seq, hasMore and subscriptionId.
// Every value it does not keep is skipped by its structure (strings with
// their escapes, nested objects and arrays, numbers, literals), never by a
// substring search, so a key inside a string or a nested object is never
// taken for a field. It checks structure, not full JSON validity (number
// syntax and escape sequences are not verified): the daemon's answers are
// well-formed JSON; a malformed one is reported where the walk fails.

// page is what one attach or read answer says.
type page struct {
	id     []byte // the raw id (aliases the line)
	err    []byte // the raw error when not null (aliases the line)
	events int    // elements of result.events
	last   uint64 // seq of the last element (0 without one)
	more   bool   // result.hasMore
	sub    []byte // result.subscriptionId, unescaped bytes (aliases the line)
}

type walker struct {
	b []byte
	i int
}

var errWalk = errors.New("malformed JSON")

func (w *walker) fail(what string) error {
	return fmt.Errorf("%w at byte %d: %s", errWalk, w.i, what)
}

func (w *walker) ws() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// peek returns the next byte after blanks (0 at the end).
func (w *walker) peek() byte {
	w.ws()
	if w.i < len(w.b) {
		return w.b[w.i]
	}
	return 0
}

func (w *walker) expect(c byte) error {
	if w.peek() != c {
		return w.fail("want " + strconv.QuoteRune(rune(c)))
	}
	w.i++
	return nil
}

// str reads a string and returns its raw bytes between the quotes (escapes
// left as they are). A quote ends the string unless an odd run of
// backslashes precedes it.
func (w *walker) str() ([]byte, error) {
	if err := w.expect('"'); err != nil {
		return nil, err
	}
	start := w.i
	for {
		k := bytes.IndexByte(w.b[w.i:], '"')
		if k < 0 {
			w.i = len(w.b)
			return nil, w.fail("unterminated string")
		}
		q := w.i + k
		n := 0
		for j := q - 1; j >= start && w.b[j] == '\\'; j-- {
			n++
		}
		w.i = q + 1
		if n%2 == 0 {
			return w.b[start:q], nil
		}
	}
}

// skip skips one value of any kind.
func (w *walker) skip() error {
	switch c := w.peek(); {
	case c == '"':
		_, err := w.str()
		return err
	case c == '{':
		return w.object(func([]byte) error { return w.skip() })
	case c == '[':
		_, err := w.array(func() error { return w.skip() })
		return err
	case c == '-' || c >= '0' && c <= '9':
		w.scalar()
		return nil
	case c == 't' || c == 'f' || c == 'n':
		return w.literal()
	default:
		return w.fail("want a value")
	}
}

// scalar returns a number's bytes.
func (w *walker) scalar() []byte {
	start := w.i
	for w.i < len(w.b) {
		switch c := w.b[w.i]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			w.i++
			continue
		}
		break
	}
	return w.b[start:w.i]
}

var litTrue, litFalse, litNull = []byte("true"), []byte("false"), []byte("null")

// literal skips true, false or null.
func (w *walker) literal() error {
	for _, l := range [...][]byte{litTrue, litFalse, litNull} {
		if bytes.HasPrefix(w.b[w.i:], l) {
			w.i += len(l)
			return nil
		}
	}
	return w.fail("want true, false or null")
}

// object walks an object, calling field for each key with the walker on
// its value; field must consume the value.
func (w *walker) object(field func(key []byte) error) error {
	if err := w.expect('{'); err != nil {
		return err
	}
	if w.peek() == '}' {
		w.i++
		return nil
	}
	for {
		k, err := w.str()
		if err != nil {
			return err
		}
		if err := w.expect(':'); err != nil {
			return err
		}
		if err := field(k); err != nil {
			return err
		}
		switch w.peek() {
		case ',':
			w.i++
		case '}':
			w.i++
			return nil
		default:
			return w.fail("want , or }")
		}
	}
}

// array walks an array, calling elem with the walker on each element;
// it returns the number of elements.
func (w *walker) array(elem func() error) (int, error) {
	if err := w.expect('['); err != nil {
		return 0, err
	}
	if w.peek() == ']' {
		w.i++
		return 0, nil
	}
	for n := 1; ; n++ {
		if err := elem(); err != nil {
			return n, err
		}
		switch w.peek() {
		case ',':
			w.i++
		case ']':
			w.i++
			return n, nil
		default:
			return n, w.fail("want , or ]")
		}
	}
}

// scanPage walks one response line.
func scanPage(line []byte) (page, error) {
	var p page
	w := &walker{b: line}
	err := w.object(func(k []byte) error {
		switch string(k) {
		case "id":
			w.ws()
			start := w.i
			err := w.skip()
			p.id = w.b[start:w.i]
			return err
		case "error":
			w.ws()
			start := w.i
			err := w.skip()
			if v := w.b[start:w.i]; string(v) != "null" {
				p.err = v
			}
			return err
		case "result":
			if w.peek() != '{' {
				return w.skip()
			}
			return w.object(p.resultField(w))
		default:
			return w.skip()
		}
	})
	if err == nil && w.peek() != 0 {
		err = w.fail("data after the message")
	}
	return p, err
}

func (p *page) resultField(w *walker) func([]byte) error {
	return func(k []byte) error {
		switch string(k) {
		case "events":
			if w.peek() != '[' {
				return w.skip()
			}
			n, err := w.array(func() error { return p.event(w) })
			p.events = n
			return err
		case "hasMore":
			w.ws()
			p.more = bytes.HasPrefix(w.b[w.i:], litTrue)
			return w.skip()
		case "subscriptionId":
			if w.peek() != '"' {
				return w.skip()
			}
			s, err := w.str()
			p.sub = s
			return err
		default:
			return w.skip()
		}
	}
}

// event walks one element of events, keeping its seq.
func (p *page) event(w *walker) error {
	if w.peek() != '{' {
		return w.skip()
	}
	return w.object(func(k []byte) error {
		if string(k) != "seq" {
			return w.skip()
		}
		if c := w.peek(); c < '0' || c > '9' {
			return w.fail("seq is not a number")
		}
		var v uint64
		for _, c := range w.scalar() {
			if c < '0' || c > '9' || v > (math.MaxUint64-9)/10 {
				return w.fail("seq is not an unsigned integer")
			}
			v = v*10 + uint64(c-'0')
		}
		p.last = v
		return nil
	})
}
