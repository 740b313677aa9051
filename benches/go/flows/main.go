// The workloads of benches/flows.rs on Go's sync.Pool, one run per process:
//
//	flows pipe SIZE MESSAGES IN_FLIGHT CONSUMERS
//	flows sftp FILE READERS CHUNK FILE_LEN DOWNLOADS
//
// prints the wall time in ms, the buffers the pool made, and the peak
// resident set (VmHWM) in KiB, as the Rust runs do.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
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
	var ms float64
	switch {
	case len(a) == 5 && a[0] == "pipe":
		ms = pipe(atoi(a[1]), atoi(a[2]), atoi(a[3]), atoi(a[4]))
	case len(a) == 6 && a[0] == "sftp":
		ms = sftp(a[1], atoi(a[2]), atoi(a[3]), atoi(a[4]), atoi(a[5]))
	default:
		fmt.Fprintln(os.Stderr, "usage: flows pipe SIZE MESSAGES IN_FLIGHT CONSUMERS | flows sftp FILE READERS CHUNK FILE_LEN DOWNLOADS")
		os.Exit(2)
	}
	fmt.Printf("%.3f %d %s\n", ms, atomic.LoadInt64(&made), peakRSS())
}
