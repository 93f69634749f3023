package agent

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
)

// bytesConn is a net.Conn that reads b, at most n bytes a read.
type bytesConn struct {
	net.Conn
	b []byte
	n int
}

func (c *bytesConn) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.b)
	c.b = c.b[k:]
	return k, nil
}

// acksModel is what the acks at the head of in say, and the stream after
// them (ok false: in cannot be a stdio agent's output).
func acksModel(in []byte) (stream []byte, pid uint32, acked, ok bool) {
	for range 2 {
		if len(in) == 0 {
			return nil, 0, false, false
		}
		if in[0] != 'H' {
			return in, pid, false, true
		}
		if len(in) < 4 {
			return nil, 0, false, false
		}
		switch string(in[:4]) {
		case CallerPreambleAck:
			return in[4:], pid, true, true
		case PIDAck:
			if pid != 0 || len(in) < 8 {
				return nil, 0, false, false
			}
			pid = binary.BigEndian.Uint32(in[4:8])
			if pid == 0 || pid > maxPID {
				return nil, 0, false, false
			}
			in = in[8:]
		default:
			return nil, 0, false, false
		}
	}
	return in, pid, false, true
}

// FuzzStdioAcks: the head of a stdio agent's stdout is read for its acks
// (its pid, whether it takes caller preambles) before the multiplexer
// reads the rest. Whatever the container wrote, the wrapped conn passes
// on exactly the bytes after the acks, reports the pid and the preamble
// ack they held, and fails its first read when the head is no acks and
// no multiplexer's byte; however the reads cut it.
func FuzzStdioAcks(f *testing.F) {
	pid := binary.BigEndian.AppendUint32([]byte(PIDAck), 4242)
	f.Add(append(append(bytes.Clone(pid), CallerPreambleAck...), 0, 0, 0, 1), uint8(3))
	f.Add(append(bytes.Clone(pid), 0, 1, 2), uint8(0))
	f.Add([]byte(CallerPreambleAck+"HGP1"), uint8(7))
	f.Add(append(bytes.Clone(pid), pid...), uint8(1))
	f.Add([]byte("HGP1\x00\x40\x00\x01"), uint8(2))
	f.Add([]byte("HX"), uint8(0))
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		stream, wantPID, wantAcked, ok := acksModel(in)
		c, acks := ReadStdioAcks(&bytesConn{b: bytes.Clone(in), n: int(chunk) + 1})
		buf := make([]byte, int(chunk%16)+1)
		var got []byte
		for {
			n, err := c.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				if err != io.EOF && ok {
					t.Fatalf("%x: %v, want the stream %x", in, err, stream)
				}
				break
			}
		}
		if !ok {
			if len(in) > 0 && len(got) > 0 {
				t.Fatalf("%x is no acks nor a stream, yet %x came through", in, got)
			}
			return
		}
		if !bytes.Equal(got, stream) || acks.PID() != int(wantPID) || acks.Callers() != wantAcked {
			t.Fatalf("%x: stream %x pid %d acked %v, want %x %d %v", in, got, acks.PID(), acks.Callers(), stream, wantPID, wantAcked)
		}
	})
}
