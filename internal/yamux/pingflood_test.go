package yamux

import (
	"runtime"
	"testing"
	"time"
)

// TestPingFloodBounded (hostgate): a peer that pings without reading
// what the session writes must not make the session start a goroutine
// per ping. Upstream did, until the write timeout ended the session.
func TestPingFloodBounded(t *testing.T) {
	conf := testConfNoKeepAlive()
	conf.ConnectionWriteTimeout = time.Minute // as bytestream sets it: the conn's watchdog bounds writes
	peerConn, serverConn := testConnPipe(t)
	server, err := Server(serverConn, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		serverConn.(*pipeConn).writeBlocker.Unlock()
		_ = server.Close()
		_ = peerConn.Close()
	}()
	serverConn.(*pipeConn).writeBlocker.Lock() // the peer never reads

	before := runtime.NumGoroutine()
	const pings = 5000
	frame := make([]byte, 0, pings*headerSize)
	for i := range pings {
		hdr := header(make([]byte, headerSize))
		hdr.encode(typePing, flagSYN, 0, uint32(i))
		frame = append(frame, hdr...)
	}
	if _, err := peerConn.Write(frame); err != nil {
		t.Fatal(err)
	}
	// The session has read every ping once this write goes through: the
	// pipe hands bytes over only as the session's reader takes them.
	hdr := header(make([]byte, headerSize))
	hdr.encode(typePing, flagACK, 0, 1<<31)
	if _, err := peerConn.Write(hdr); err != nil {
		t.Fatal(err)
	}
	if server.IsClosed() {
		t.Fatal("session closed by the pings")
	}
	if grew := runtime.NumGoroutine() - before; grew > 64 {
		t.Fatalf("%d pings the session could not answer left %d more goroutines; want at most 64", pings, grew)
	}
}
