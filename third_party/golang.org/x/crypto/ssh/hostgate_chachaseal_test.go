package ssh

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"testing"
)

// hostgate: change 21 (HOSTGATE.md). The two ways of applying
// chacha20-poly1305@openssh.com's payload key stream — the AEAD's Seal and
// chacha20 alone — as one cipher each, with the same keys.
func chachaPair(t testing.TB) (sealed, stream *chacha20Poly1305Cipher) {
	key := make([]byte, 64)
	for i := range key {
		key[i] = byte(i*7 + 3)
	}
	a, err := newChaCha20Cipher(key, nil, nil, DirectionAlgorithms{})
	if err != nil {
		t.Fatal(err)
	}
	sealed = a.(*chacha20Poly1305Cipher)
	if sealed.sealer == nil {
		t.Skip("no sealer on this machine (amd64 with AVX2 and BMI2 has one): chacha20 alone is the only path, and upstream's")
	}
	b, _ := newChaCha20Cipher(key, nil, nil, DirectionAlgorithms{})
	stream = b.(*chacha20Poly1305Cipher)
	stream.sealer = nil
	return sealed, stream
}

// padReader gives the same "random" padding to both ciphers.
type padReader struct{ n byte }

func (r *padReader) Read(p []byte) (int, error) {
	for i := range p {
		r.n++
		p[i] = r.n
	}
	return len(p), nil
}

// chachaWrite returns the packet c writes for payload.
func chachaWrite(t testing.TB, c *chacha20Poly1305Cipher, seq uint32, payload []byte) []byte {
	var out bytes.Buffer
	if err := c.writeCipherPacket(seq, &out, &padReader{}, payload); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// The sealer's packets are the stream cipher's, byte for byte (so
// OpenSSH's, whose interop sshlayer's tests check), and each reads the
// other's, for payloads around the 64-byte block and the AVX2 code's
// 128-, 256- and 512-byte strides, up to a 256 KiB packet, at sequence
// numbers where the nonce's bytes differ.
func TestHostgateChaChaSealerIsTheStreamCipher(t *testing.T) {
	sealed, stream := chachaPair(t)
	sizes := []int{1, 2, 15, 16, 17, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1000, 4096, 32 << 10, 32<<10 + 9, maxPacket - 300}
	for _, seq := range []uint32{0, 1, 0x01020304, 0xffffffff} {
		for _, size := range sizes {
			payload := make([]byte, size)
			_, _ = rand.Read(payload)
			a := chachaWrite(t, sealed, seq, payload)
			b := chachaWrite(t, stream, seq, payload)
			if !bytes.Equal(a, b) {
				t.Fatalf("seq %d, %d bytes: the sealer's packet differs from chacha20's", seq, size)
			}
			for _, r := range []struct {
				name string
				c    *chacha20Poly1305Cipher
			}{{"sealer", sealed}, {"stream", stream}} {
				got, err := r.c.readCipherPacket(seq, bytes.NewReader(a))
				if err != nil {
					t.Fatalf("seq %d, %d bytes, read by the %s: %v", seq, size, r.name, err)
				}
				if !bytes.Equal(got, payload) {
					t.Fatalf("seq %d, %d bytes, read by the %s: payload differs", seq, size, r.name)
				}
			}
		}
	}
}

// A packet changed on the wire still fails its MAC, before anything is
// decrypted, and the wrong sequence number too.
func TestHostgateChaChaSealerChecksTheTag(t *testing.T) {
	sealed, _ := chachaPair(t)
	payload := bytes.Repeat([]byte("hostgate"), 1000)
	pkt := chachaWrite(t, sealed, 7, payload)
	for _, at := range []int{0, 4, 100, len(pkt) - 17, len(pkt) - 1} {
		bad := bytes.Clone(pkt)
		bad[at] ^= 0x20
		if _, err := sealed.readCipherPacket(7, bytes.NewReader(bad)); err == nil {
			t.Errorf("a packet with byte %d of %d changed was read", at, len(pkt))
		}
	}
	if _, err := sealed.readCipherPacket(8, bytes.NewReader(pkt)); err == nil {
		t.Error("a packet read with the next sequence number was read")
	}
	if got, err := sealed.readCipherPacket(7, bytes.NewReader(pkt)); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("the packet itself: %v", err)
	}
}

// FuzzHostgateChaChaSealer: for any payload and sequence number, the
// sealer writes what chacha20 alone writes, and reads it back.
func FuzzHostgateChaChaSealer(f *testing.F) {
	f.Add([]byte("x"), uint32(0))
	f.Add(bytes.Repeat([]byte{0xa5}, 300), uint32(0xffffffff))
	f.Add(make([]byte, 4100), uint32(3))
	f.Fuzz(func(t *testing.T, payload []byte, seq uint32) {
		if len(payload) == 0 || len(payload) > maxPacket-300 {
			return
		}
		sealed, stream := chachaPair(t)
		a := chachaWrite(t, sealed, seq, payload)
		if b := chachaWrite(t, stream, seq, payload); !bytes.Equal(a, b) {
			t.Fatal("the sealer's packet differs from chacha20's")
		}
		got, err := sealed.readCipherPacket(seq, bytes.NewReader(a))
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("read back: %v", err)
		}
	})
}

// BenchmarkHostgateChaCha: a full 32 KiB channel data packet written and
// read, through the sealer and through chacha20 alone.
func BenchmarkHostgateChaCha(b *testing.B) {
	sealed, stream := chachaPair(b)
	plain := make([]byte, 32<<10+9)
	plain[0] = msgChannelData
	for _, c := range []struct {
		name string
		c    *chacha20Poly1305Cipher
	}{{"sealer", sealed}, {"stream", stream}} {
		b.Run(c.name+"/write", func(b *testing.B) {
			bw := bufio.NewWriter(discardWriter{})
			b.SetBytes(int64(len(plain)))
			for b.Loop() {
				if err := c.c.writeCipherPacket(0, bw, rand.Reader, plain); err != nil {
					b.Fatal(err)
				}
				if err := bw.Flush(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/read", func(b *testing.B) {
			pkt := chachaWrite(b, c.c, 0, plain)
			r := bytes.NewReader(pkt)
			b.SetBytes(int64(len(plain)))
			for b.Loop() {
				r.Reset(pkt)
				if _, err := c.c.readCipherPacket(0, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
