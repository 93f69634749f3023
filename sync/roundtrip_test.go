package syncfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
)

// SFTP packet types the link counts (draft-ietf-secsh-filexfer-02).
const (
	fxpClose  = 4
	fxpHandle = 102
)

// slowLink carries SFTP between a client and pkg/sftp's server (the
// agent's) with a one-way delay each way, in a synctest bubble: time is
// the bubble's, so a call's duration is a whole number of round trips,
// whatever the machine's load. It counts the handles the server hands out
// and the closes the client sends.
type slowLink struct {
	delay time.Duration
	opts  []sftp.ServerOption
	wg    sync.WaitGroup // the link's goroutines

	mu              sync.Mutex
	handles, closes int
}

// pipe copies src to dst, each read arriving delay later; it closes dst
// at src's end. count, when set, sees what passes.
func (l *slowLink) pipe(dst io.WriteCloser, src io.Reader, count func([]byte)) {
	testenv.DelayedCopy(&l.wg, l.delay, dst, src, count)
}

// counter returns a counter of the packets in one direction's stream.
func (l *slowLink) counter() func([]byte) {
	var buf []byte
	return func(b []byte) {
		buf = append(buf, b...)
		for len(buf) >= 5 {
			n := int(binary.BigEndian.Uint32(buf))
			if len(buf) < 4+n {
				return
			}
			l.mu.Lock()
			switch buf[4] {
			case fxpHandle:
				l.handles++
			case fxpClose:
				l.closes++
			}
			l.mu.Unlock()
			buf = buf[4+n:]
		}
	}
}

type pipeEnd struct {
	io.Reader
	io.WriteCloser
}

// connect is a SyncSpec's Connect over the link to an in-process server.
func (l *slowLink) connect(ctx context.Context) (*hostgate.SyncConnection, error) {
	c2sR, c2sW := io.Pipe()     // the client's requests, onto the link
	srvInR, srvInW := io.Pipe() // off the link, to the server
	srvOutR, srvOutW := io.Pipe()
	cliInR, cliInW := io.Pipe()
	l.pipe(srvInW, c2sR, l.counter())
	l.pipe(cliInW, srvOutR, l.counter())
	srv, err := sftp.NewServer(pipeEnd{srvInR, srvOutW}, l.opts...)
	if err != nil {
		return nil, err
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve()
		_ = srv.Close()
		_ = srvOutW.Close()
	}()
	cli, err := sftp.NewClientPipe(cliInR, c2sW, sshlayer.SFTPClientOptions()...)
	if err != nil {
		_ = c2sW.Close()
		<-served
		return nil, err
	}
	return &hostgate.SyncConnection{FS: sshlayer.NewSFTPProvider(cli), Close: func() error {
		// As a connection's end does, cut both ways at once, so that
		// calls still waiting for answers are released.
		_ = cliInR.Close()
		_ = srvInR.Close()
		err := cli.Close()
		<-served
		return err
	}}, nil
}

// TestRoundTrips: over SFTP, a ReadFile of a small file costs two round
// trips and a WriteFile two (its close sent behind its writes; three
// before December 2026), where Open, Read and Close cost four and Create,
// Write and Close six (the audit's 4.3 and 6.3 at 25 ms one way); the
// provider's streams of a small file now two as well (their first read
// with the fstat, their writes and close unwaited).
// Every handle opened is closed, the read's close after ReadFile returned.
// A transfer that takes longer than the timeout does not time out while
// its answers keep coming. Against the server as the agent runs it (255
// KiB reads) and as pkg/sftp's default (32 KiB), whose short answers the
// reads learn from.
func TestRoundTrips(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []sftp.ServerOption
	}{
		{"agent", []sftp.ServerOption{sftp.WithMaxTxPacket(256<<10 - 1<<10)}},
		{"32KiB", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testRoundTrips(t, c.opts) })
		})
	}
}

func testRoundTrips(t *testing.T, opts []sftp.ServerOption) {
	const delay = 25 * time.Millisecond
	root := t.TempDir()
	small := []byte("hello, world\n")
	mid := bytes.Repeat([]byte("0123456789abcdef"), 64<<10)  // 1 MiB: reads in flight together
	large := bytes.Repeat([]byte("0123456789abcdef"), 2<<20) // 32 MiB: more than fit in flight
	for name, data := range map[string][]byte{"small": small, "mid": mid, "large": large} {
		if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := &slowLink{delay: delay, opts: opts}
	// Time stands still once this function returns: wait for the link's
	// goroutines while it runs.
	defer link.wg.Wait()
	// The timeout is longer than any call but the 32 MiB transfers.
	fsys := New(&hostgate.SyncSpec{Connect: link.connect}, &Options{Root: root, Timeout: 9 * delay})
	defer func() {
		if err := fsys.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	if _, err := fsys.Stat("."); err != nil { // connects
		t.Fatal(err)
	}
	// The provider's own streams, on a connection of their own.
	ctx := t.Context()
	sc, err := link.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	p := sc.FS
	createSmall := func(name string) func() error {
		return func() error {
			w, err := p.Create(ctx, filepath.Join(root, name), 0o600)
			if err != nil {
				return err
			}
			_, err = w.Write(small)
			return errors.Join(err, w.Close())
		}
	}
	roundTrips := func(op func() error) int {
		t.Helper()
		start := time.Now()
		if err := op(); err != nil {
			t.Fatal(err)
		}
		return int((time.Since(start) + delay) / (2 * delay))
	}
	readBack := func(name string, want []byte) func() error {
		return func() error {
			b, err := fsys.ReadFile(name)
			if err == nil && !bytes.Equal(b, want) {
				t.Errorf("ReadFile %s: %d bytes, not the %d written", name, len(b), len(want))
			}
			return err
		}
	}
	for _, c := range []struct {
		name string
		want int // 0: any
		op   func() error
	}{
		{"Stat", 1, func() error { _, err := fsys.Stat("small"); return err }},
		{"ReadFile small", 2, readBack("small", small)},
		{"ReadFile 1 MiB", 3, readBack("mid", mid)},
		{"ReadFile 32 MiB", 0, readBack("large", large)},
		{"WriteFile new", 2, func() error { return fsys.WriteFile("new", small, 0o600) }},
		{"WriteFile existing", 2, func() error { return fsys.WriteFile("new", mid, 0o644) }},
		{"WriteFile empty", 2, func() error { return fsys.WriteFile("empty", nil, 0o640) }},
		{"WriteFile 32 MiB", 0, func() error { return fsys.WriteFile("large2", large, 0o644) }},
		{"Open, Read, Close small", 2, func() error {
			r, err := p.Open(ctx, filepath.Join(root, "small"))
			if err != nil {
				return err
			}
			b, err := io.ReadAll(r)
			if err == nil && !bytes.Equal(b, small) {
				t.Errorf("Open small: %q", b)
			}
			return errors.Join(err, r.Close())
		}},
		{"Create, Write, Close new", 2, createSmall("streamed")},
		{"Create, Write, Close existing", 2, createSmall("streamed")},
	} {
		got := roundTrips(c.op)
		if c.want != 0 && got != c.want {
			t.Errorf("%s: %d round trips, want %d", c.name, got, c.want)
		}
		t.Logf("%s: %d round trips", c.name, got)
	}
	time.Sleep(2 * delay) // the last closes' answers
	link.mu.Lock()
	handles, closes := link.handles, link.closes
	link.mu.Unlock()
	if handles != closes {
		t.Errorf("%d handles, %d closes: handles left open", handles, closes)
	}
	for name, want := range map[string]os.FileMode{"new": 0o600, "empty": 0o640} {
		if fi, err := os.Stat(filepath.Join(root, name)); err != nil || fi.Mode().Perm() != want&^umask(t) {
			t.Errorf("%s: %v, %v; want mode %v", name, fi, err, want&^umask(t))
		}
	}
	for name, want := range map[string][]byte{"new": mid, "large2": large} {
		if got, err := os.ReadFile(filepath.Join(root, name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, %v", name, len(got), err)
		}
	}
}

// umask is this process's umask, which the in-process server creates files
// under.
func umask(t *testing.T) os.FileMode {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no umask to compare modes with: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				t.Fatal(err)
			}
			return os.FileMode(m)
		}
	}
	t.Skip("no Umask line in /proc/self/status")
	return 0
}
