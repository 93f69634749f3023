package sftp

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostgate: change 40. Requests the server read but had not begun when
// its client went (the channel closed: Close, as sshlayer calls it; or a
// reply could not be written) are not performed; when the client's input
// only ended (a half-close), they are, and answered.
func TestHostgateGoneClientQueuedNotRun(t *testing.T) {
	for _, how := range []string{"Close", "replies unread", "input ended"} {
		t.Run(how, func(t *testing.T) { hostgateGoneQueued(t, how) })
	}
}

// heldWrite is a file whose writes wait for release once started says so.
type heldWrite struct {
	*os.File
	started, release chan struct{}
}

func (f *heldWrite) WriteAt(b []byte, off int64) (int, error) {
	close(f.started)
	<-f.release
	return len(b), nil
}

func hostgateGoneQueued(t *testing.T, how string) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	cr, cw := io.Pipe() // client to server
	sr, sw := io.Pipe() // server to client
	if how == "replies unread" {
		_ = sr.Close() // the client reads no answer: the init's fails
	} else {
		go func() { _, _ = io.Copy(io.Discard, sr) }()
	}
	svr, err := NewServer(pipePair{cr, sw})
	if err != nil {
		t.Fatal(err)
	}
	open := func(name string) *os.File {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	held := &heldWrite{File: open(filepath.Join(dir, "held")), started: make(chan struct{}), release: make(chan struct{})}
	heldHandle, handle := svr.nextHandle(held), svr.nextHandle(open(target))
	served := make(chan error, 1)
	go func() { served <- svr.Serve() }()
	send := func(typ fxp, b []byte) {
		t.Helper()
		pkt := marshalUint32(nil, uint32(len(b)+1))
		if _, err := cw.Write(append(append(pkt, byte(typ)), b...)); err != nil {
			t.Fatal(err)
		}
	}
	write := func(id uint32, handle string, off uint64) {
		t.Helper()
		b := marshalUint32(nil, id)
		b = marshalString(b, handle)
		b = marshalUint64(b, off)
		send(sshFxpWrite, marshalString(b, "old"))
	}
	send(sshFxpInit, marshalUint32(nil, 3))
	// A close waits for the requests before it (the held write): the
	// writes after it are read and queued, none begun, until release.
	write(1, heldHandle, 0)
	send(sshFxpClose, marshalString(marshalUint32(nil, 2), "no such handle"))
	const writes = 4
	for i := range writes {
		write(uint32(3+i), handle, uint64(i*3))
	}
	// cw's Writes returned: the server read every request.
	_ = cw.Close()
	switch how {
	case "Close":
		<-held.started
		_ = svr.Close() // as sshlayer does when the channel closes
	case "replies unread":
		// The init's reply failed, before or after the held write
		// began (if after, it was not performed, nor any after it).
		<-svr.gone // before the fix: never
	default:
		<-held.started
	}
	close(held.release)
	<-served
	_ = svr.Close() // as sshlayer does after Serve: the replies' pipe ends
	got, err := os.ReadFile(target)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("old", writes)
	if how != "input ended" {
		want = ""
	}
	if string(got) != want {
		t.Fatalf("target holds %q after the client's writes were queued, then %s; want %q", got, how, want)
	}
}
