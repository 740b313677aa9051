// The workloads of benches/flows.rs on Go's sync.Pool, one run per process:
//
//	flows pipe SIZE MESSAGES IN_FLIGHT CONSUMERS
//	flows sftp FILE READERS CHUNK FILE_LEN DOWNLOADS
//
// prints the wall time in ms, the buffers the pool made, and the peak
// resident set (VmHWM) in KiB, as the Rust runs do;
//
//	flows fanin PRODUCERS SIZE OBJECTS REPS QUEUE
//
// prints the best of REPS fan-in runs in ns per object.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var made int64

func newPool(size int, full bool) *sync.Pool {
	return &sync.Pool{New: func() any {
		atomic.AddInt64(&made, 1)
		var b []byte
		if full {
			b = make([]byte, size)
		} else {
			b = make([]byte, 0, size)
		}
		return &b
	}}
}

type message struct {
	i   int
	buf *[]byte
}

// pipe: one producer fills buffers and sends them to consumers, which
// read them and Put them back.
func pipe(size, messages, inFlight, consumers int) float64 {
	pool := newPool(size, false)
	ch := make(chan message, inFlight)
	var wg sync.WaitGroup
	var sink uint64
	start := time.Now()
	for c := 0; c < consumers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sum uint64
			for m := range ch {
				b := *m.buf
				if len(b) != size {
					panic("short buffer")
				}
				for j := 0; j < size; j += 4096 {
					sum += uint64(b[j])
				}
				sum += uint64(b[0]^b[size-1]) + uint64(m.i)
				*m.buf = b[:0]
				pool.Put(m.buf)
			}
			atomic.AddUint64(&sink, sum)
		}()
	}
	for i := 0; i < messages; i++ {
		p := pool.Get().(*[]byte)
		// Filled as Rust's resize does, by copies that double.
		b := (*p)[:size]
		b[0] = byte(i)
		for j := 1; j < size; j *= 2 {
			copy(b[j:], b[:j])
		}
		*p = b
		ch <- message{i, p}
	}
	close(ch)
	wg.Wait()
	return float64(time.Since(start).Microseconds()) / 1e3
}

// sftp: readers read a file in chunks into pooled buffers; one writer
// writes them out and Puts them back; downloads times, new goroutines
// each time.
func sftp(path string, readers, chunk, fileLen, downloads int) float64 {
	f, err := os.Open(path)
	if err != nil {
		panic(err)
	}
	pool := newPool(chunk, true)
	chunks := fileLen / chunk
	var sum uint64
	start := time.Now()
	for d := 0; d < downloads; d++ {
		var next int64 = -1
		ch := make(chan message, 2*readers)
		var wg sync.WaitGroup
		for r := 0; r < readers; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c := int(atomic.AddInt64(&next, 1))
					if c >= chunks {
						return
					}
					p := pool.Get().(*[]byte)
					if _, err := f.ReadAt(*p, int64(c*chunk)); err != nil {
						panic(err)
					}
					ch <- message{c, p}
				}
			}()
		}
		go func() { wg.Wait(); close(ch) }()
		for m := range ch {
			if _, err := io.Discard.Write(*m.buf); err != nil {
				panic(err)
			}
			sum += uint64((*m.buf)[m.i%chunk])
			pool.Put(m.buf)
		}
	}
	_ = sum
	return float64(time.Since(start).Microseconds()) / 1e3
}

// ring is a bounded multi-producer queue (Vyukov's), the counterpart of
// the Rust side's crossbeam ArrayQueue: each slot carries a sequence
// number that says whose turn it is.
type ring struct {
	slots      []slot
	mask       uint64
	head, tail uint64
}

type slot struct {
	seq uint64
	buf *[]byte
}

func newRing(capacity int) *ring {
	r := &ring{slots: make([]slot, capacity), mask: uint64(capacity - 1)}
	for i := range r.slots {
		r.slots[i].seq = uint64(i)
	}
	return r
}

func (r *ring) push(b *[]byte) bool {
	for {
		pos := atomic.LoadUint64(&r.tail)
		s := &r.slots[pos&r.mask]
		seq := atomic.LoadUint64(&s.seq)
		switch {
		case seq == pos:
			if atomic.CompareAndSwapUint64(&r.tail, pos, pos+1) {
				s.buf = b
				atomic.StoreUint64(&s.seq, pos+1)
				return true
			}
		case seq < pos:
			return false // full
		}
	}
}

func (r *ring) pop() *[]byte {
	for {
		pos := atomic.LoadUint64(&r.head)
		s := &r.slots[pos&r.mask]
		seq := atomic.LoadUint64(&s.seq)
		switch {
		case seq == pos+1:
			if atomic.CompareAndSwapUint64(&r.head, pos, pos+1) {
				b := s.buf
				atomic.StoreUint64(&s.seq, pos+r.mask+1)
				return b
			}
		case seq < pos+1:
			return nil // empty
		}
	}
}

// spin waits a little, then gives the processor away, as the Rust side's
// SpinChannel does.
func spin(spins *int) {
	*spins++
	if *spins%256 == 0 {
		runtime.Gosched()
	}
}

// fanin: producers each get a buffer, write 64 bytes and push it into
// one ring; one consumer pops it and Puts it back. The goroutines start
// together from a spinning start and stamp their own start and end; the
// result is ns per object, the best of reps.
func fanin(producers, size, objects, reps, queue int) float64 {
	pool := newPool(size, false)
	best := 0.0
	for rep := 0; rep < reps; rep++ {
		r := newRing(queue)
		var arrived int64
		total := int64(producers + 1)
		starts := make([]time.Time, producers+1)
		ends := make([]time.Time, producers+1)
		var wg sync.WaitGroup
		wait := func(me int) {
			atomic.AddInt64(&arrived, 1)
			spins := 0
			for atomic.LoadInt64(&arrived) < total {
				spin(&spins)
			}
			starts[me] = time.Now()
		}
		wg.Add(producers + 1)
		go func() {
			defer wg.Done()
			wait(0)
			var sum uint64
			for n := 0; n < objects; n++ {
				spins := 0
				var p *[]byte
				for p = r.pop(); p == nil; p = r.pop() {
					spin(&spins)
				}
				sum += uint64((*p)[63])
				*p = (*p)[:0]
				pool.Put(p)
			}
			_ = sum
			ends[0] = time.Now()
		}()
		for i := 0; i < producers; i++ {
			share := objects / producers
			if i < objects%producers {
				share++
			}
			go func(me, share int) {
				defer wg.Done()
				var payload [64]byte
				wait(me)
				for n := 0; n < share; n++ {
					p := pool.Get().(*[]byte)
					payload[0] = byte(n)
					*p = append((*p)[:0], payload[:]...)
					spins := 0
					for !r.push(p) {
						spin(&spins)
					}
				}
				ends[me] = time.Now()
			}(i+1, share)
		}
		wg.Wait()
		first, last := starts[0], ends[0]
		for i := range starts {
			if starts[i].Before(first) {
				first = starts[i]
			}
			if ends[i].After(last) {
				last = ends[i]
			}
		}
		ns := float64(last.Sub(first).Nanoseconds()) / float64(objects)
		if rep == 0 || ns < best {
			best = ns
		}
	}
	return best
}

func peakRSS() string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), "VmHWM:") {
			return strings.Fields(s.Text())[1]
		}
	}
	panic("no VmHWM")
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

func main() {
	a := os.Args[1:]
	if len(a) == 6 && a[0] == "fanin" {
		fmt.Printf("%.2f\n", fanin(atoi(a[1]), atoi(a[2]), atoi(a[3]), atoi(a[4]), atoi(a[5])))
		return
	}
	var ms float64
	switch {
	case len(a) == 5 && a[0] == "pipe":
		ms = pipe(atoi(a[1]), atoi(a[2]), atoi(a[3]), atoi(a[4]))
	case len(a) == 6 && a[0] == "sftp":
		ms = sftp(a[1], atoi(a[2]), atoi(a[3]), atoi(a[4]), atoi(a[5]))
	default:
		fmt.Fprintln(os.Stderr, "usage: flows pipe SIZE MESSAGES IN_FLIGHT CONSUMERS | flows sftp FILE READERS CHUNK FILE_LEN DOWNLOADS | flows fanin PRODUCERS SIZE OBJECTS REPS QUEUE")
		os.Exit(2)
	}
	fmt.Printf("%.3f %d %s\n", ms, atomic.LoadInt64(&made), peakRSS())
}
