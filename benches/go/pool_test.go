// Go's sync.Pool on the workloads of benches/pool.rs, for a side-by-side
// reading on the same machine:
//
//	cd benches/go && go test -bench . -benchtime 2s -count 5
//
// Every workload uses 4 KiB byte buffers and writes 64 bytes per use.
// RunParallel reports the aggregate cost per operation over all threads.
package gobench

import (
	"runtime"
	"sync"
	"testing"
)

const size = 4096

var write [64]byte

func newPool() *sync.Pool {
	return &sync.Pool{New: func() any { b := make([]byte, 0, size); return &b }}
}

func use(p *sync.Pool) {
	b := p.Get().(*[]byte)
	*b = append((*b)[:0], write[:]...)
	p.Put(b)
}

// hot/1: get, write, return on one goroutine.
func BenchmarkHot1(b *testing.B) {
	p := newPool()
	for i := 0; i < b.N; i++ {
		use(p)
	}
}

// hot/all: the same on every P (aggregate ns/op).
func BenchmarkHotAll(b *testing.B) {
	p := newPool()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			use(p)
		}
	})
}

func overflow(p *sync.Pool, held []*[]byte) {
	for j := range held {
		b := p.Get().(*[]byte)
		*b = append((*b)[:0], write[:]...)
		held[j] = b
	}
	for _, b := range held {
		p.Put(b)
	}
}

// overflow/1: hold 100, return 100 (ns per 100 buffers).
func BenchmarkOverflow1(b *testing.B) {
	p := newPool()
	held := make([]*[]byte, 100)
	for i := 0; i < b.N; i++ {
		overflow(p, held)
	}
}

// overflow/all: the same on every P (aggregate ns per 100 buffers).
func BenchmarkOverflowAll(b *testing.B) {
	p := newPool()
	b.RunParallel(func(pb *testing.PB) {
		held := make([]*[]byte, 100)
		for pb.Next() {
			overflow(p, held)
		}
	})
}

// handoff: one goroutine gets and fills, another returns (ns per buffer).
func BenchmarkHandoff(b *testing.B) {
	p := newPool()
	ch := make(chan *[]byte, 64)
	done := make(chan struct{})
	go func() {
		for b := range ch {
			p.Put(b)
		}
		close(done)
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf := p.Get().(*[]byte)
		*buf = append((*buf)[:0], write[:]...)
		ch <- buf
	}
	close(ch)
	<-done
}

func init() { _ = runtime.GOMAXPROCS(0) }
