package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// The on-disk layout of bbolt v1.5.0 (go.etcd.io/bbolt/internal/common),
// read here before bbolt maps the file: bbolt trusts its meta pages and
// reads any page they point to straight from the mapping, so a file
// shorter than they claim faults (SIGBUS: Go's unrecoverable
// `fatal error: fault`) instead of failing.
//
//	page header (16 bytes): id u64, flags u16, count u16, overflow u32
//	meta (after the header of pages 0 and 1, 64 bytes): magic u32,
//	  version u32, pageSize u32, flags u32, root {pgid u64, sequence u64},
//	  freelist u64, pgid (high water mark) u64, txid u64,
//	  checksum u64 = FNV-64a of the 56 bytes before it
//
// Integers are in the machine's byte order (bbolt casts the mapping to
// structs).
const (
	pageHeaderSize = 16
	metaSize       = 64
	metaMagic      = 0xED0CDAED
	metaVersion    = 2
	noFreelist     = ^uint64(0)

	flagBranch   = 0x01
	flagLeaf     = 0x02
	flagMeta     = 0x04
	flagFreelist = 0x10

	minPageSize = 1024
	maxPageSize = 1024 << 14 // the largest bbolt searches for
)

var ne = binary.NativeEndian

// meta is one decoded meta page.
type meta struct {
	page     int // 0 or 1
	pageSize uint64
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

// decodeMeta decodes the meta at the start of b (the bytes after a page
// header) and checks its magic, version and checksum as bbolt does.
func decodeMeta(b []byte, page int) (meta, error) {
	if len(b) < metaSize {
		return meta{}, fmt.Errorf("meta page %d: cut short (%d bytes)", page, len(b))
	}
	if m := ne.Uint32(b[0:]); m != metaMagic {
		return meta{}, fmt.Errorf("meta page %d: bad magic %#x", page, m)
	}
	if v := ne.Uint32(b[4:]); v != metaVersion {
		return meta{}, fmt.Errorf("meta page %d: version %d, want %d", page, v, metaVersion)
	}
	h := fnv.New64a()
	h.Write(b[:56])
	if sum, want := ne.Uint64(b[56:]), h.Sum64(); sum != want {
		return meta{}, fmt.Errorf("meta page %d: checksum %#x, computed %#x", page, sum, want)
	}
	return meta{page: page, pageSize: uint64(ne.Uint32(b[8:])), root: ne.Uint64(b[16:]),
		freelist: ne.Uint64(b[32:]), pgid: ne.Uint64(b[40:]), txid: ne.Uint64(b[48:])}, nil
}

// readMetaAt reads and decodes the meta of the page at off.
func readMetaAt(f io.ReaderAt, off int64, page int) (meta, error) {
	b := make([]byte, pageHeaderSize+metaSize)
	n, err := f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return meta{}, fmt.Errorf("meta page %d: %w", page, err)
	}
	if n < pageHeaderSize {
		return meta{}, fmt.Errorf("meta page %d: cut short (%d bytes)", page, n)
	}
	return decodeMeta(b[pageHeaderSize:n], page)
}

// fileMeta is what validateMeta learned: the meta bbolt will use, and a
// note when the other meta page is damaged (bbolt falls back to the valid
// one: a torn meta write is what it is built to survive, but if media
// damage hit the newer page, its last commit is gone, so it is logged).
type fileMeta struct {
	meta
	size     int64
	fallback string // which meta page is damaged and which one bbolt uses ("" if both are valid)
}

// validateMeta checks the file against its own meta pages, reading it with
// pread only: at least one meta page valid (bbolt uses the valid one with
// the higher txid), a sane page size, the root and freelist below the high
// water mark, and the file long enough to hold every page up to it.
func validateMeta(f *os.File) (fileMeta, error) {
	fi, err := f.Stat()
	if err != nil {
		return fileMeta{}, err
	}
	size := fi.Size()
	m0, err0 := readMetaAt(f, 0, 0)
	var m1 meta
	var err1 error
	if err0 == nil {
		if !saneSize(m0.pageSize) {
			return fileMeta{}, fmt.Errorf("meta page 0: page size %d out of range", m0.pageSize)
		}
		m1, err1 = readMetaAt(f, int64(m0.pageSize), 1)
	} else {
		// Page 0 is unreadable: find page 1 as bbolt does, trying each
		// page size from 1 KiB, and trust it only where it says it is.
		err1 = errors.New("meta page 1: not found")
		for ps := uint64(minPageSize); ps <= maxPageSize && int64(ps) < size; ps *= 2 {
			if m, err := readMetaAt(f, int64(ps), 1); err == nil && m.pageSize == ps {
				m1, err1 = m, nil
				break
			}
		}
	}
	var use meta
	fallback := ""
	switch {
	case err0 != nil && err1 != nil:
		return fileMeta{}, fmt.Errorf("no valid meta page (%v; %v)", err0, err1)
	case err0 != nil:
		use, fallback = m1, fmt.Sprintf("%v; opened from meta page 1 (txid %d)", err0, m1.txid)
	case err1 != nil:
		use, fallback = m0, fmt.Sprintf("%v; opened from meta page 0 (txid %d)", err1, m0.txid)
	case m0.pageSize != m1.pageSize:
		return fileMeta{}, fmt.Errorf("meta pages disagree on the page size (%d, %d)", m0.pageSize, m1.pageSize)
	case m1.txid > m0.txid:
		use = m1
	default:
		use = m0
	}
	if err := use.check(size); err != nil {
		return fileMeta{}, err
	}
	return fileMeta{meta: use, size: size, fallback: fallback}, nil
}

func saneSize(ps uint64) bool {
	return ps >= minPageSize && ps <= maxPageSize && ps&(ps-1) == 0
}

// check: the meta's page references fit below its high water mark, and
// the file holds every page below it.
func (m meta) check(size int64) error {
	if !saneSize(m.pageSize) {
		return fmt.Errorf("meta page %d: page size %d out of range", m.page, m.pageSize)
	}
	if m.pgid < 4 || m.pgid > uint64(size)/m.pageSize {
		return fmt.Errorf("file is %d bytes but meta page %d (txid %d) says it holds %d pages of %d bytes (%d bytes): truncated",
			size, m.page, m.txid, m.pgid, m.pageSize, m.pgid*m.pageSize)
	}
	if m.root < 2 || m.root >= m.pgid {
		return fmt.Errorf("meta page %d: root page %d outside [2, %d)", m.page, m.root, m.pgid)
	}
	if m.freelist == noFreelist {
		// bbolt would rebuild the list by scanning the file, panicking on
		// another goroutine if that fails; sessiond always writes it.
		return fmt.Errorf("meta page %d: no freelist (not written by sessiond)", m.page)
	}
	if m.freelist < 2 || m.freelist >= m.pgid {
		return fmt.Errorf("meta page %d: freelist page %d outside [2, %d)", m.page, m.freelist, m.pgid)
	}
	return nil
}
