package rpc

import (
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// stats are the rpc layer's counters for daemon.stats.
type stats struct {
	mu      sync.Mutex
	rpcs    map[string]uint64
	reasons map[string]uint64

	connsTotal     atomic.Uint64
	refusedPeers   atomic.Uint64
	refusedConns   atomic.Uint64 // past max_connections
	framingFaults  atomic.Uint64
	batchesRefused atomic.Uint64
	writeTimeouts  atomic.Uint64
	laggedSubs     atomic.Uint64
	answeredInline atomic.Uint64 // slow methods' calls answered without queueing (inline.go)

	out *outbound // the server's outbound budget, for its figures
}

func (s *stats) rpc(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rpcs == nil {
		s.rpcs = map[string]uint64{}
	}
	s.rpcs[method]++
}

func (s *stats) errored(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reasons == nil {
		s.reasons = map[string]uint64{}
	}
	s.reasons[reason]++
}

func (s *stats) lagged() { s.laggedSubs.Add(1) }

func (s *stats) snapshot(open int) map[string]any {
	out := s.out
	s.mu.Lock()
	rpcs := make(map[string]uint64, len(s.rpcs))
	for k, v := range s.rpcs {
		rpcs[k] = v
	}
	reasons := make(map[string]uint64, len(s.reasons))
	for k, v := range s.reasons {
		reasons[k] = v
	}
	s.mu.Unlock()
	return map[string]any{
		"rpcs":              rpcs,
		"rpcErrors":         reasons,
		"connections":       map[string]uint64{"open": uint64(open), "total": s.connsTotal.Load()},
		"refusedPeers":      s.refusedPeers.Load(),
		"refusedConns":      s.refusedConns.Load(),
		"framingFaults":     s.framingFaults.Load(),
		"batchesRefused":    s.batchesRefused.Load(),
		"writeTimeouts":     s.writeTimeouts.Load(),
		"laggedSubscribers": s.laggedSubs.Load(),
		"answeredInline":    s.answeredInline.Load(),
		"outboundBytes":     out.total.Load(),
		"outboundCloses":    out.closes.Load(),
		"heapBytes":         heapBytes(),
	}
}

// heapBytes is the Go heap's objects, live or not yet swept (the
// runtime's figure, read without stopping the world).
func heapBytes() uint64 {
	m := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return m[0].Value.Uint64()
}
