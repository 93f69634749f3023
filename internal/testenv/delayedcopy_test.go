package testenv

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"
)

// The round-trip benchmarks (sync, client, sshlayer) count a link's round
// trips through DelayedLink: each byte must arrive, in order, and no
// sooner than the link's delay after it was written, both ways.
func TestDelayedLink(t *testing.T) {
	const delay = 20 * time.Millisecond
	raw, far := net.Pipe()
	link := DelayedLink(t, raw, delay)

	for _, dir := range []struct {
		name string
		w    io.Writer
		r    io.Reader
	}{{"out", link, far}, {"back", far, link}} {
		t.Run(dir.name, func(t *testing.T) {
			start := time.Now()
			go func() { _, _ = dir.w.Write([]byte("ping")) }()
			got := make([]byte, 4)
			if _, err := io.ReadFull(dir.r, got); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); string(got) != "ping" || took < delay {
				t.Fatalf("read %q after %v; want \"ping\", no sooner than %v", got, took, delay)
			}

			// Many writes in flight at once keep their order.
			want := make([]byte, 1<<20)
			_, _ = rand.Read(want)
			errc := make(chan error, 1)
			go func() {
				var err error
				for b := want; len(b) > 0 && err == nil; b = b[min(len(b), 3000):] {
					_, err = dir.w.Write(b[:min(len(b), 3000)])
				}
				errc <- err
			}()
			back := make([]byte, len(want))
			if _, err := io.ReadFull(dir.r, back); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, want) {
				t.Fatal("the bytes that came through differ from those written")
			}
		})
	}

	// Closing one end closes the other after the delay, and the link's
	// goroutines end (the test's cleanup waits for them; TestMain's goleak
	// checks that nothing else is left).
	_ = link.Close()
	if n, err := far.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("far end read %d bytes, %v after the near end closed; want EOF", n, err)
	}
	_ = far.Close()
}
