package ssh

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
)

// TestHostgateBufferReusesElements: a channel's buffer takes a received
// packet and hands it to Read without allocating (upstream allocated a
// list element per packet), and its bytes still come out whole and in
// order whatever the sizes of writes and reads.
func TestHostgateBufferReusesElements(t *testing.T) {
	b := newBuffer()
	data := make([]byte, 32<<10)
	p := make([]byte, 255<<10)
	allocs := testing.AllocsPerRun(100, func() {
		for range 8 {
			b.write(data)
		}
		for got := 0; got < 8*len(data); {
			n, err := b.Read(p)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	})
	if allocs != 0 {
		t.Fatalf("8 packets through the buffer allocated %v times", allocs)
	}
	if b.spares > maxSpareElements {
		t.Fatalf("the buffer keeps %d spare elements, more than %d", b.spares, maxSpareElements)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	var want, got bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		rr := rand.New(rand.NewPCG(3, 4))
		q := make([]byte, 100<<10)
		for {
			n, err := b.Read(q[:1+rr.IntN(len(q)-1)])
			got.Write(q[:n])
			if err == io.EOF {
				return
			}
		}
	}()
	for i := range 500 {
		w := make([]byte, rng.IntN(40<<10))
		for j := range w {
			w[j] = byte(i + j)
		}
		want.Write(w)
		b.write(w)
	}
	b.eof()
	<-done
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("read %d bytes, want the %d written, in order", got.Len(), want.Len())
	}
}
