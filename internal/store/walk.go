package store

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// walkFile follows every page reference of the tree m describes (the
// freelist, every bucket's branch and leaf pages, nested and inline
// buckets) and proves that each one lands inside the file: a page below
// the high water mark that names itself, of the right type, its overflow
// pages below the mark too, referenced once (no cycle), every element and
// every key and value inside its page. bbolt trusts all of this; with it
// proven, neither its open nor its consistency check (which runs on a
// goroutine of its own, where SetPanicOnFault cannot reach) can read past
// the end of the mapping.
//
// The walk reads its own read-only mapping of exactly the pages below the
// mark (the file was checked to hold them), through a Go slice: an index
// out of range is a bounds panic, never a fault. Run it through contained.
func walkFile(f *os.File, m meta) error {
	n := m.pgid * m.pageSize
	data, err := unix.Mmap(int(f.Fd()), 0, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map %d bytes to check them: %w", n, err)
	}
	defer unix.Munmap(data)
	w := &walker{data: data, ps: m.pageSize, hwm: m.pgid, seen: make([]uint64, (m.pgid+63)/64)}
	w.mark(0)
	w.mark(1)
	if err := w.freelist(m.freelist); err != nil {
		return err
	}
	return w.tree(m.root, 0)
}

// maxDepth bounds b-tree depth plus bucket nesting (sessiond nests three
// buckets deep; a b-tree of 64 levels would need more pages than exist).
const maxDepth = 64

type walker struct {
	data []byte // pages [0, hwm)
	ps   uint64
	hwm  uint64
	seen []uint64 // bitset of pages already referenced
}

func (w *walker) mark(id uint64) bool {
	bit := uint64(1) << (id % 64)
	if w.seen[id/64]&bit != 0 {
		return false
	}
	w.seen[id/64] |= bit
	return true
}

// page returns page id with its overflow pages, checked and marked.
func (w *walker) page(id uint64) ([]byte, error) {
	if id < 2 || id >= w.hwm {
		return nil, fmt.Errorf("a reference to page %d, outside [2, %d)", id, w.hwm)
	}
	off := id * w.ps
	hdr := w.data[off : off+pageHeaderSize]
	if got := ne.Uint64(hdr); got != id {
		return nil, fmt.Errorf("page %d says it is page %d", id, got)
	}
	over := uint64(ne.Uint32(hdr[12:]))
	if id+over >= w.hwm {
		return nil, fmt.Errorf("page %d: %d overflow pages run past the last page %d", id, over, w.hwm-1)
	}
	for i := id; i <= id+over; i++ {
		if !w.mark(i) {
			return nil, fmt.Errorf("page %d is referenced twice", i)
		}
	}
	return w.data[off : off+(over+1)*w.ps], nil
}

func (w *walker) freelist(id uint64) error {
	p, err := w.page(id)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	if f := ne.Uint16(p[8:]); f != flagFreelist {
		return fmt.Errorf("freelist page %d has type %#x", id, f)
	}
	count, start := uint64(ne.Uint16(p[10:])), uint64(pageHeaderSize)
	if count == 0xFFFF { // more ids than a u16 holds: the first one is the count
		count, start = ne.Uint64(p[pageHeaderSize:]), pageHeaderSize+8
	}
	if count > (uint64(len(p))-start)/8 {
		return fmt.Errorf("freelist page %d: %d ids overrun its %d bytes", id, count, len(p))
	}
	for i := range count {
		if free := ne.Uint64(p[start+8*i:]); free < 2 || free >= w.hwm {
			return fmt.Errorf("freelist page %d: free page %d outside [2, %d)", id, free, w.hwm)
		}
	}
	return nil
}

// tree checks the b-tree rooted at id.
func (w *walker) tree(id uint64, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("page %d: tree deeper than %d levels", id, maxDepth)
	}
	p, err := w.page(id)
	if err != nil {
		return err
	}
	switch f := ne.Uint16(p[8:]); f {
	case flagBranch:
		return w.branch(p, id, depth)
	case flagLeaf:
		return w.leaf(p, id, depth)
	default:
		return fmt.Errorf("page %d has type %#x, want a branch or leaf page", id, f)
	}
}

// elements returns the element count of p, checked against its length.
func elements(p []byte, id uint64) (uint64, error) {
	count := uint64(ne.Uint16(p[10:]))
	if pageHeaderSize+count*16 > uint64(len(p)) {
		return 0, fmt.Errorf("page %d: %d elements overrun its %d bytes", id, count, len(p))
	}
	return count, nil
}

// span returns the n bytes at pos, which bbolt counts from the element's
// own offset e; ok is false when they leave p.
func span(p []byte, e, pos, n uint64) ([]byte, bool) {
	start := e + pos
	if start+n > uint64(len(p)) {
		return nil, false
	}
	return p[start : start+n], true
}

func (w *walker) branch(p []byte, id uint64, depth int) error {
	count, err := elements(p, id)
	if err != nil {
		return err
	}
	if count == 0 {
		return fmt.Errorf("branch page %d is empty", id)
	}
	for i := range count {
		e := pageHeaderSize + 16*i
		pos, ksize := uint64(ne.Uint32(p[e:])), uint64(ne.Uint32(p[e+4:]))
		if _, ok := span(p, e, pos, ksize); !ok {
			return fmt.Errorf("branch page %d: key %d lies outside the page", id, i)
		}
		if err := w.tree(ne.Uint64(p[e+8:]), depth+1); err != nil {
			return err
		}
	}
	return nil
}

// leaf checks a leaf page (id names it in errors; an inline bucket's page
// is named by the page holding it) and descends into its buckets.
func (w *walker) leaf(p []byte, id uint64, depth int) error {
	count, err := elements(p, id)
	if err != nil {
		return err
	}
	for i := range count {
		e := pageHeaderSize + 16*i
		flags := ne.Uint32(p[e:])
		pos, ksize, vsize := uint64(ne.Uint32(p[e+4:])), uint64(ne.Uint32(p[e+8:])), uint64(ne.Uint32(p[e+12:]))
		kv, ok := span(p, e, pos, ksize+vsize)
		if !ok {
			return fmt.Errorf("leaf page %d: key/value %d lies outside the page", id, i)
		}
		if flags&bucketLeafFlag != 0 {
			if err := w.bucket(kv[ksize:], id, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// bucketLeafFlag marks a leaf element whose value is a bucket: its root
// page id and sequence (16 bytes), and for an inline bucket (root 0) its
// single leaf page right after.
const bucketLeafFlag = 0x01

func (w *walker) bucket(v []byte, in uint64, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("page %d: buckets nested deeper than %d levels", in, maxDepth)
	}
	if len(v) < 16 {
		return fmt.Errorf("leaf page %d: a bucket value of %d bytes", in, len(v))
	}
	if root := ne.Uint64(v); root != 0 {
		return w.tree(root, depth)
	}
	inline := v[16:]
	if len(inline) < pageHeaderSize {
		return fmt.Errorf("leaf page %d: an inline bucket of %d bytes", in, len(inline))
	}
	if f := ne.Uint16(inline[8:]); f != flagLeaf {
		return fmt.Errorf("leaf page %d: an inline bucket page of type %#x", in, f)
	}
	return w.leaf(inline, in, depth)
}
