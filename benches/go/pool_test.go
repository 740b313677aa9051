// Go's sync.Pool on the workloads of benches/pool.rs, measured by
// benches/report.py in the same run as the Rust benchmarks:
//
//	cd benches/go && go test -run '^$' -bench . -benchtime 100ms -cpu 1,2
//
// Every workload uses 4 KiB byte buffers and writes 64 bytes per use. The
// "All" benchmarks run one goroutine per P (-cpu sets how many Ps) and
// report the aggregate cost per operation over all of them; Go's timer for
// RunParallel includes starting the goroutines, so it can only add time.
package gobench

import (
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

// handoff's floor: the same channel moving a nil pointer, no pool.
func BenchmarkChannelAlone(b *testing.B) {
	ch := make(chan *[]byte, 64)
	done := make(chan struct{})
	go func() {
		for range ch {
		}
		close(done)
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ch <- nil
	}
	close(ch)
	<-done
}
