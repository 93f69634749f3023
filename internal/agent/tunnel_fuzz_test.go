package agent

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/proxyproto"
)

// FuzzTunnelInput serves a tunnel as connect.go does (serveMux with the
// default mux config, every stream's caller preamble read, an SSH server
// behind it) on whatever its gateway, or what claims to be one, sends:
// yamux frames, streams with preambles well-formed or not, SSH's first
// bytes. Once the gateway has gone the tunnel must end and every
// connection it served with it.
func FuzzTunnelInput(f *testing.F) {
	frame := func(typ uint8, flags uint16, id uint32, body []byte, length uint32) []byte {
		h := make([]byte, 12)
		h[1] = typ
		binary.BigEndian.PutUint16(h[2:4], flags)
		binary.BigEndian.PutUint32(h[4:8], id)
		binary.BigEndian.PutUint32(h[8:12], length)
		return append(h, body...)
	}
	data := func(id uint32, b []byte) []byte { return frame(0, 0, id, b, uint32(len(b))) }
	pre := proxyproto.Header{Src: netip.MustParseAddrPort("192.0.2.7:40000")}.Append(nil)
	var a []byte
	a = append(a, frame(1, 1, 1, nil, 0)...)
	a = append(a, data(1, pre)...)
	a = append(a, data(1, []byte("SSH-2.0-OpenSSH_9.6\r\n"))...)
	a = append(a, frame(0, 4, 1, nil, 0)...)
	f.Add(a)
	var b []byte
	b = append(b, frame(1, 1, 3, nil, 0)...)
	b = append(b, data(3, []byte("PROXY TCP4 nonsense\r\n"))...)
	b = append(b, frame(1, 1, 5, nil, 0)...)
	b = append(b, data(5, pre[:10])...)
	b = append(b, frame(1, 8, 5, nil, 0)...)
	b = append(b, frame(2, 1, 0, nil, 1)...)
	f.Add(b)
	f.Add(append(frame(1, 1, 1, nil, 0), data(1, append(pre, "SSH-2.0-x\r\n\x00\x00\x00\x0c\x0a\x14"...))...))
	srv, _, _ := serveNewServer(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		gw, conn := net.Pipe()
		done := make(chan error, 1)
		go func() {
			wait, err := serveMux(context.Background(), conn, srv, nil, tunnel{callers: true})
			wait()
			done <- err
		}()
		drained := make(chan struct{})
		go func() { defer close(drained); _, _ = io.Copy(io.Discard, gw) }()
		_ = gw.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, _ = gw.Write(in)
		_ = gw.Close()
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatal("the tunnel, or a connection it served, still running 30 s after its gateway left")
		}
		<-drained
	})
}
