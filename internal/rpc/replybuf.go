package rpc

import "sync"

// Buffers of read and attach replies are kept for the next page. A reply
// is written synchronously (stream.writeCounted returns once every byte
// went or the write failed) and nothing keeps its bytes after that, so
// conn.reply hands the buffer back when it returns. Without this every
// page of a replay costs a fresh, zeroed allocation of its size (~800 KB
// for 4096 small events) and the collector runs that much more often.
var replyBufs sync.Pool // of *[]byte

// maxPooledReply: a buffer larger than this is left to the collector.
const maxPooledReply = 8 << 20

// pooledRaw is newRaw from the pool: room for rawHead, then a result of
// about size bytes and the tail.
func pooledRaw(size int) []byte {
	need := rawHead + size + rawTail
	if p, _ := replyBufs.Get().(*[]byte); p != nil && cap(*p) >= need {
		return (*p)[:rawHead]
	}
	return make([]byte, rawHead, need+need/8)
}

// recycle hands a pooled reply's buffer back once it is written or dropped.
func recycle(b []byte) {
	if cap(b) > maxPooledReply {
		return
	}
	b = b[:0]
	replyBufs.Put(&b)
}
