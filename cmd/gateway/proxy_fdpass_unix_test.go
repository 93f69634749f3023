//go:build unix

package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSendFD: a descriptor sent as OpenSSH's mm_receive_fd takes it (one
// byte, one SCM_RIGHTS descriptor) arrives working: bytes written to the
// received pipe end come out of the pipe.
func TestSendFD(t *testing.T) {
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sp[0])
	defer unix.Close(sp[1])
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := sendFD(sp[0], int(w.Fd())); err != nil {
		t.Fatal(err)
	}
	w.Close()
	buf, oob := make([]byte, 8), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(sp[1], buf, oob, 0)
	if err != nil || n != 1 {
		t.Fatalf("recvmsg: %d bytes, %v; want the 1 byte OpenSSH reads", n, err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control messages %v, %v; want one", msgs, err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("descriptors %v, %v; want one", fds, err)
	}
	got := os.NewFile(uintptr(fds[0]), "received")
	if _, err := got.WriteString("through the passed descriptor"); err != nil {
		t.Fatal(err)
	}
	got.Close()
	b := make([]byte, 64)
	n, _ = r.Read(b)
	if string(b[:n]) != "through the passed descriptor" {
		t.Fatalf("read %q from the pipe", b[:n])
	}
}

// TestProxyFdpassNeedsASocket: --fdpass without ssh's ProxyUseFdpass
// (standard output a pipe) fails before it asks the gateway anything,
// naming the setting that is missing.
func TestProxyFdpassNeedsASocket(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var stderr strings.Builder
	err = proxyFdpass(context.Background(), w, &stderr, "http://127.0.0.1:1", "tok", "h", proxyOptions{fdpass: true})
	if err == nil || !strings.Contains(stderr.String(), "ProxyUseFdpass yes") {
		t.Fatalf("err %v, stderr %q; want a refusal naming ProxyUseFdpass", err, stderr.String())
	}
}
