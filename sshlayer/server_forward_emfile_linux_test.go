package sshlayer

import (
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// A host out of descriptors for a moment (EMFILE) must not end a remote
// forward's accepting (ssh -R): its port stayed bound with nothing
// accepting, so every later connection hung. The connection that met it
// waits in the backlog and is forwarded once descriptors are back.
//
// Not parallel: the descriptor limit is the whole test process's, and the
// parallel tests wait until the sequential ones are done.
func TestRemoteForwardOutlivesEMFILE(t *testing.T) {
	var logs testenv.LogBuffer
	ts := srvStartServer(t, &ServerConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := srvDialServer(t, ts)
	echo := srvStartEcho(t)
	ln, err := c.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			fc, err := ln.Accept()
			if err != nil {
				return
			}
			tc, err := net.Dial("tcp", echo)
			if err != nil {
				_ = fc.Close()
				continue
			}
			go func() { _, _ = io.Copy(tc, fc); _ = tc.(*net.TCPConn).CloseWrite() }()
			go func() { _, _ = io.Copy(fc, tc); _ = fc.Close(); _ = tc.Close() }()
		}
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	restore := testenv.ExhaustFDs(t)
	conn, err := net.Dial("tcp", addr) // the last descriptor: the host's accept meets EMFILE
	if err != nil {
		restore()
		t.Fatal(err)
	}
	defer conn.Close()
	// The log says when the accept met it; a build that gave up logs
	// nothing, and the round trip below finds its dead listener.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !strings.Contains(logs.String(), "too many open files"); {
		time.Sleep(5 * time.Millisecond)
	}
	restore()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if err := srvEchoCheck(conn, 1<<16); err != nil {
		t.Fatalf("the connection that met EMFILE: %v; want it forwarded once descriptors were back", err)
	}
	later, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	_ = later.SetDeadline(time.Now().Add(30 * time.Second))
	if err := srvEchoCheck(later, 1<<16); err != nil {
		t.Fatalf("a later connection: %v", err)
	}
}
