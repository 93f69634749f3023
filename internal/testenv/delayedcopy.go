package testenv

import (
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// DelayedCopy copies src to dst on two goroutines that wg waits for, each
// read arriving delay after it was read, in order: one direction of a
// slow link, whose reads go on while earlier bytes are in flight. It
// closes dst at src's end. count, when set, sees each read as it arrives.
func DelayedCopy(wg *sync.WaitGroup, delay time.Duration, dst io.WriteCloser, src io.Reader, count func([]byte)) {
	type chunk struct {
		due time.Time
		b   []byte
	}
	ch := make(chan chunk, 1024)
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(ch)
		for {
			b := make([]byte, 64<<10)
			n, err := src.Read(b)
			if n > 0 {
				ch <- chunk{time.Now().Add(delay), b[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		defer dst.Close()
		for c := range ch {
			time.Sleep(time.Until(c.due))
			if count != nil {
				count(c.b)
			}
			if _, err := dst.Write(c.b); err != nil {
				for range ch { // let the reader end
				}
				return
			}
		}
	}()
}

// DelayedLink is raw behind a link whose bytes each way arrive delay
// after they were sent; its goroutines end with raw, and the test waits
// for them.
func DelayedLink(tb testing.TB, raw net.Conn, delay time.Duration) net.Conn {
	var wg sync.WaitGroup
	tb.Cleanup(wg.Wait)
	near, far := net.Pipe()
	DelayedCopy(&wg, delay, raw, far, nil)
	DelayedCopy(&wg, delay, far, raw, nil)
	return near
}

// ReportRoundTrips reports what spent (each call's time over a link of
// delay one way) took in round trips: rtt/op, the median call's, and
// rtt-least/op, the least: on a busy machine a goroutine's wakeup can
// take as long as a round trip, which only ever adds.
func ReportRoundTrips(b *testing.B, spent []time.Duration, delay time.Duration) {
	spent = slices.Clone(spent)
	slices.Sort(spent)
	b.ReportMetric(float64(spent[len(spent)/2])/float64(2*delay), "rtt/op")
	b.ReportMetric(float64(spent[0])/float64(2*delay), "rtt-least/op")
}
