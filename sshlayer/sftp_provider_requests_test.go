//go:build unix

package sshlayer

import (
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/testenv"
)

// requestCounter passes a client's SFTP packets on to the server and
// counts them: how many requests a provider call cost, not how long.
type requestCounter struct {
	w io.WriteCloser

	mu   sync.Mutex
	n    int    // whole packets written
	left int    // bytes of the current packet still to come
	hdr  []byte // the start of the next packet's length
}

func (c *requestCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	for q := p; len(q) > 0; {
		if c.left > 0 {
			k := min(len(q), c.left)
			c.left -= k
			q = q[k:]
			if c.left == 0 {
				c.n++
			}
			continue
		}
		k := min(len(q), 4-len(c.hdr))
		c.hdr = append(c.hdr, q[:k]...)
		q = q[k:]
		if len(c.hdr) == 4 {
			c.left = int(binary.BigEndian.Uint32(c.hdr))
			c.hdr = c.hdr[:0]
		}
	}
	c.mu.Unlock()
	return c.w.Write(p)
}

func (c *requestCounter) Close() error { return c.w.Close() }

// sent is the number of whole requests written so far.
func (c *requestCounter) sent() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// countedSFTP opens an SFTP session over sc (the INIT counted out) and
// returns a provider over it and its counter.
func countedSFTP(t *testing.T, sc *ssh.Client) (*sftpProvider, *requestCounter) {
	t.Helper()
	sess, err := sc.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	in, err := sess.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.RequestSubsystem("sftp"); err != nil {
		t.Fatal(err)
	}
	rc := &requestCounter{w: in}
	c, err := sftp.NewClientPipe(out, rc, SFTPClientOptions()...)
	if err != nil {
		t.Fatalf("sftp handshake: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = sess.Close()
	})
	p := newSFTPProvider(c, nil)
	p.namesErrno = announces([]byte(sc.ServerVersion()), sftpErrnoToken)
	return p, rc
}

// TestAgentSFTPThroughFileOneRequest: against the agent's server, a
// Rename or Symlink whose path goes through a file (file/x) costs the
// client its one request, and is ENOTDIR. The server answered them "no
// such file" (as OpenSSH's sftp-server does), where its STAT and OPEN of
// the same path say "not a directory", so the client looked the names up
// again to learn which: 3 or 5 requests for a Rename, 2 for a Symlink,
// and a loop on the way (ELOOP) stayed ErrNotExist. The same calls that
// succeed cost one request too.
func TestAgentSFTPThroughFileOneRequest(t *testing.T) {
	t.Parallel()
	ts := srvStartServer(t, &ServerConfig{})
	p, rc := countedSFTP(t, srvDialServer(t, ts))
	ctx := testCtx(t)
	dir := t.TempDir()
	file := path.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := path.Join(dir, "other")
	if err := os.WriteFile(other, []byte("o"), 0o644); err != nil {
		t.Fatal(err)
	}
	loop := path.Join(dir, "loop")
	if err := os.Symlink("loop", loop); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what  string
		errno syscall.Errno // 0: the call succeeds
		call  func() error
	}{
		{"Rename from file/x", syscall.ENOTDIR, func() error { return p.Rename(ctx, path.Join(file, "x"), path.Join(dir, "y")) }},
		{"Rename onto file/x", syscall.ENOTDIR, func() error { return p.Rename(ctx, other, path.Join(file, "x")) }},
		{"Rename onto file/x/y", syscall.ENOTDIR, func() error { return p.Rename(ctx, other, path.Join(file, "x", "y")) }},
		{"Symlink at file/x", syscall.ENOTDIR, func() error { return p.Symlink(ctx, "t", path.Join(file, "x")) }},
		{"Symlink at loop/x", syscall.ELOOP, func() error { return p.Symlink(ctx, "t", path.Join(loop, "x")) }},
		{"Rename onto loop/x", syscall.ELOOP, func() error { return p.Rename(ctx, other, path.Join(loop, "x")) }},
		{"Symlink", 0, func() error { return p.Symlink(ctx, "t", path.Join(dir, "link")) }},
		{"Rename", 0, func() error { return p.Rename(ctx, other, path.Join(dir, "moved")) }},
	} {
		before := rc.sent()
		err := c.call()
		if n := rc.sent() - before; n != 1 {
			t.Errorf("%s: %d requests, want 1", c.what, n)
		}
		if c.errno == 0 {
			if err != nil {
				t.Errorf("%s: %v", c.what, err)
			}
			continue
		}
		if !errors.Is(err, c.errno) || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want %v and not ErrNotExist", c.what, err, c.errno)
		}
	}
}

// countedSFTPServer runs OpenSSH's sftp-server as startSFTPServer does,
// with the requests to it counted.
func countedSFTPServer(t *testing.T) (*sftpProvider, *requestCounter) {
	t.Helper()
	_, err := os.Stat(sftpServerBin)
	testenv.RequirePeer(t, "OpenSSH sftp-server", err == nil)
	cmd := exec.Command(sftpServerBin, "-e", "-l", "ERROR")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = testLogWriter{t}
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rc := &requestCounter{w: in}
	c, err := sftp.NewClientPipe(out, rc, SFTPClientOptions()...)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("sftp handshake: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Close() // closes stdin: sftp-server exits on EOF
		if err := cmd.Wait(); err != nil {
			t.Errorf("sftp-server: %v", err)
		}
	})
	return newSFTPProvider(c, nil), rc
}

// TestSFTPProviderLookupCostsOnlyFailures: against OpenSSH's sftp-server,
// which says "no such file" for ELOOP and ENOTDIR alike, the provider
// learns which by further requests only when a call failed: a call that
// succeeds, through symlinks too, is its one request. A Stat of a missing
// name costs a Stat of its parent and an Lstat of it beside (one round
// trip), and a Stat round a loop (a -> b -> a) a few more, and is ELOOP.
func TestSFTPProviderLookupCostsOnlyFailures(t *testing.T) {
	t.Parallel()
	p, rc := countedSFTPServer(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	if err := os.WriteFile(path.Join(dir, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path.Join(dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"file", "tofile"}, {"dir", "todir"}, {"tofile", "totofile"}, {"b", "a"}, {"a", "b"}} {
		if err := os.Symlink(l[0], path.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		what string
		call func() error
	}{
		{"Stat", func() error { _, err := p.Stat(ctx, path.Join(dir, "file")); return err }},
		{"Stat through 2 links", func() error { _, err := p.Stat(ctx, path.Join(dir, "totofile")); return err }},
		{"Stat through a link on the way", func() error { _, err := p.Stat(ctx, path.Join(dir, "todir", ".")); return err }},
		{"Lstat", func() error { _, err := p.Lstat(ctx, path.Join(dir, "a")); return err }},
		{"Readlink", func() error { _, err := p.Readlink(ctx, path.Join(dir, "a")); return err }},
		{"Chmod", func() error { return p.Chmod(ctx, path.Join(dir, "tofile"), 0o600) }},
		{"Symlink", func() error { return p.Symlink(ctx, "x", path.Join(dir, "todir", "new")) }},
	} {
		before := rc.sent()
		if err := c.call(); err != nil {
			t.Errorf("%s: %v", c.what, err)
		}
		if n := rc.sent() - before; n != 1 {
			t.Errorf("%s: %d requests, want 1", c.what, n)
		}
	}
	for _, c := range []struct {
		name  string
		errno error
		max   int
	}{
		{"missing", fs.ErrNotExist, 3},
		{"a", syscall.ELOOP, 12},
		{"a/x", syscall.ELOOP, 14},
		{"file/x", syscall.ENOTDIR, 3},
	} {
		before := rc.sent()
		_, err := p.Stat(ctx, path.Join(dir, c.name))
		n := rc.sent() - before
		if !errors.Is(err, c.errno) {
			t.Errorf("Stat %s: %v, want %v", c.name, err, c.errno)
		}
		if n > c.max {
			t.Errorf("Stat %s: %d requests, want at most %d", c.name, n, c.max)
		}
		t.Logf("Stat %s: %d requests: %v", c.name, n, err)
	}
}

// TestAgentSFTPMissingOneRequest: a call on a missing name costs its one
// request against the agent, whose "no such file" is ENOENT alone (it
// announces sftp-errno@hostgate): the provider looked the name's parent
// up after it, and the name beside (2 more requests, a round trip), to
// learn whether it was ENOTDIR or ELOOP, which the agent says as such.
// Against a server that does not announce it (an older agent) the lookups
// stay.
func TestAgentSFTPMissingOneRequest(t *testing.T) {
	t.Parallel()
	ts := srvStartServer(t, &ServerConfig{})
	sc := srvDialServer(t, ts)
	if !announces(sc.ServerVersion(), sftpErrnoToken) {
		t.Fatalf("the agent's version %q does not announce %s", sc.ServerVersion(), sftpErrnoToken)
	}
	p, rc := countedSFTP(t, sc)
	ctx := testCtx(t)
	dir := t.TempDir()
	missing := path.Join(dir, "missing")
	calls := []struct {
		what string
		call func() error
	}{
		{"Stat", func() error { _, err := p.Stat(ctx, missing); return err }},
		{"Lstat", func() error { _, err := p.Lstat(ctx, missing); return err }},
		{"Open", func() error { _, err := p.Open(ctx, missing); return err }},
		{"Chmod", func() error { return p.Chmod(ctx, missing, 0o600) }},
		{"Readlink", func() error { _, err := p.Readlink(ctx, missing); return err }},
	}
	for _, c := range calls {
		before := rc.sent()
		if err := c.call(); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s of a missing name: %v, want ErrNotExist", c.what, err)
		}
		if n := rc.sent() - before; n != 1 {
			t.Errorf("%s of a missing name: %d requests, want 1", c.what, n)
		}
	}
	p.namesErrno = false // as against an agent that does not announce it
	before := rc.sent()
	if _, err := p.Stat(ctx, missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat of a missing name, looked up: %v, want ErrNotExist", err)
	}
	if n := rc.sent() - before; n != 3 {
		t.Errorf("Stat of a missing name, looked up: %d requests, want 3", n)
	}
}
