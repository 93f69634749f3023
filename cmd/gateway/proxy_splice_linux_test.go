package main

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// TestOpenSSHProxyDirectSplices: through a direct session, ssh carries
// 32 MiB to the host (ssh box 'cat > FILE') and 32 MiB back (ssh box 'cat
// FILE') intact, and gateway proxy, joining ssh's pipes to the agent's
// TCP conn, moves them in the kernel (splice): its own read and write
// system calls (rchar and wchar in /proc/PID/io) carry a small part of
// the bytes, where a copy would read each byte once and write it once.
func TestOpenSSHProxyDirectSplices(t *testing.T) {
	sshPath, err := exec.LookPath("ssh")
	testenv.RequirePeer(t, "openssh (ssh)", err == nil)
	b := startDirectGateway(t)
	b.runDirectAgent(t, "box", t.TempDir(), "", &testenv.LogBuffer{})
	ctx := testCtx(t)
	home, config, env := sshConfig(t, ctx, b.base, b.clientTok, "box")
	const size = 32 << 20
	data := make([]byte, size)
	_, _ = rand.Read(data)
	file := filepath.Join(t.TempDir(), "data")

	// ssh runs command with stdin, through the proxy, which writes its
	// I/O counts when it ends: rchar and wchar.
	ssh := func(name, command string, stdin []byte) (stdout []byte, rchar, wchar int64) {
		t.Helper()
		ioFile := filepath.Join(home, name+".io")
		// A FIFO, which the test holds open for reading and writing: the
		// proxy's write does not wait for a reader, and the read below
		// waits for the proxy's, which comes when it ends, after ssh's
		// (ssh does not wait for its ProxyCommand).
		if err := syscall.Mkfifo(ioFile, 0o600); err != nil {
			t.Fatal(err)
		}
		fifo, err := os.OpenFile(ioFile, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer fifo.Close()
		cmd := exec.CommandContext(ctx, sshPath, "-F", config, "box", command)
		cmd.Env = append(env, "HOSTGATE_VERBOSE=1", "HOSTGATE_TEST_PROC_IO="+ioFile)
		cmd.Stdin = bytes.NewReader(stdin)
		var errb strings.Builder
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ssh box %q: %v\n%s", command, err, errb.String())
		}
		if !strings.Contains(errb.String(), "direct session to") {
			t.Fatalf("ssh box %q: the proxy said %q; want a direct session, for the test to mean anything", command, errb.String())
		}
		if err := fifo.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
			t.Fatal(err)
		}
		var io []byte
		for !bytes.Contains(io, []byte("cancelled_write_bytes:")) || !bytes.HasSuffix(io, []byte("\n")) {
			p := make([]byte, 4096)
			n, err := fifo.Read(p)
			if err != nil {
				t.Fatalf("the proxy of ssh box %q wrote %q of its /proc/PID/io: %v; it said:\n%s", command, io, err, errb.String())
			}
			io = append(io, p[:n]...)
		}
		return out, procIO(t, io, "rchar"), procIO(t, io, "wchar")
	}
	const most = size / 8
	_, r, w := ssh("up", "cat > "+file, data)
	t.Logf("up: the proxy read %d bytes and wrote %d by system calls", r, w)
	if r > most || w > most {
		t.Errorf("the proxy read %d bytes and wrote %d by system calls while ssh sent %d: want at most %d each, the rest spliced", r, w, size, most)
	}
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the host's file: %d bytes (%v), want the %d ssh sent", len(got), err, size)
	}
	out, r, w := ssh("down", "cat "+file, nil)
	if !bytes.Equal(out, data) {
		t.Fatalf("ssh box 'cat' printed %d bytes, want the file's %d", len(out), size)
	}
	t.Logf("down: the proxy read %d bytes and wrote %d by system calls", r, w)
	if r > most || w > most {
		t.Errorf("the proxy read %d bytes and wrote %d by system calls while the host sent %d: want at most %d each, the rest spliced", r, w, size, most)
	}
}

// procIO is field name's value in /proc/PID/io's text.
func procIO(t *testing.T, text []byte, name string) int64 {
	t.Helper()
	for _, l := range strings.Split(string(text), "\n") {
		if v, ok := strings.CutPrefix(l, name+": "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in %q", name, text)
	return 0
}
