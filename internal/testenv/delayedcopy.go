package testenv

import (
	"io"
	"sync"
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
