package ssh

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"testing"
)

// hostgate: change 12 (HOSTGATE.md). An AES-GCM packet reaches the conn
// below the transport's bufio.Writer in one Write, and reads back as
// sent, for packets of every size around the writer's 4 KiB buffer and up
// to a full 32 KiB channel data packet.
func TestHostgateGCMOneWritePerPacket(t *testing.T) {
	key := make([]byte, 16)
	iv := []byte("hostgate-ivX")
	w, err := newGCMCipher(key, bytes.Clone(iv), nil, DirectionAlgorithms{})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := newGCMCipher(key, bytes.Clone(iv), nil, DirectionAlgorithms{})
	var wire writeLog
	bw := bufio.NewWriter(&wire)
	for _, size := range []int{1, 100, 4091, 4092, 4096, 5000, 32<<10 + 9, 35000} {
		plain := bytes.Repeat([]byte{byte(size)}, size)
		plain[0] = msgChannelData
		wire.writes = 0
		if err := w.writeCipherPacket(0, bw, rand.Reader, plain); err != nil {
			t.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
		if wire.writes != 1 {
			t.Errorf("a packet of %d bytes reached the conn in %d writes, want 1", size, wire.writes)
		}
		got, err := r.readCipherPacket(0, &wire.buf)
		if err != nil {
			t.Fatalf("packet of %d bytes: %v", size, err)
		}
		if !bytes.Equal(got, plain) {
			t.Fatalf("packet of %d bytes read back differs", size)
		}
		r.(*gcmCipher).owned = false
	}
}

// writeLog keeps what is written and counts the writes.
type writeLog struct {
	buf    bytes.Buffer
	writes int
}

func (l *writeLog) Write(p []byte) (int, error) {
	l.writes++
	return l.buf.Write(p)
}

// BenchmarkHostgateGCMWrite seals and writes full channel data packets
// through the transport's bufio.Writer, as the agent sends a download.
func BenchmarkHostgateGCMWrite(b *testing.B) {
	w, err := newGCMCipher(make([]byte, 16), []byte("hostgate-ivX"), nil, DirectionAlgorithms{})
	if err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriter(discardWriter{})
	plain := make([]byte, 32<<10+9)
	plain[0] = msgChannelData
	b.SetBytes(int64(len(plain)))
	for b.Loop() {
		if err := w.writeCipherPacket(0, bw, rand.Reader, plain); err != nil {
			b.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
