package e2e

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/internal/sshdtest"
	"github.com/hostgate/hostgate/internal/testenv"
)

// TestRsyncThroughGateway runs rsync over ssh through `gateway proxy`, as
// users do: a tree with symlinks, a hard link and modes pushed with
// --delete and pulled back unchanged; then a --partial transfer cut off by
// a dropped connection keeps what it received, as it does against sshd.
// The agent sent the remote rsync SIGHUP the moment the connection went,
// so it died with its temporary file (.big.XXXXXX) instead of keeping the
// partial file, and the next run started from zero.
func TestRsyncThroughGateway(t *testing.T) {
	testenv.RequirePeer(t, "rsync and OpenSSH ssh", lookPath("rsync") && lookPath("ssh"))
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	ctx := testCtx(t, 2*time.Minute)
	dir := t.TempDir()
	cfg := sshConfig(t, g, "alpha", dir)

	src := filepath.Join(dir, "src")
	must(t, os.MkdirAll(filepath.Join(src, "sub"), 0o751))
	must(t, os.WriteFile(filepath.Join(src, "a.txt"), []byte("hello\n"), 0o640))
	must(t, os.Link(filepath.Join(src, "a.txt"), filepath.Join(src, "hard")))
	must(t, os.Symlink("a.txt", filepath.Join(src, "link")))
	must(t, os.Symlink("/nonexistent", filepath.Join(src, "dangling")))
	must(t, os.WriteFile(filepath.Join(src, "sub", "sp ace ü"), []byte("x"), 0o600))
	dst := filepath.Join(t.TempDir(), "dst")
	must(t, os.MkdirAll(dst, 0o755))
	must(t, os.WriteFile(filepath.Join(dst, "stale"), []byte("gone after --delete"), 0o600))

	rsync := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, "rsync", append([]string{"-e", "ssh -F " + cfg}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("rsync %v: %v\n%s", args, err, out)
		}
	}
	rsync("-aH", "--delete", src+"/", "alpha:"+dst+"/")
	back := filepath.Join(dir, "back")
	rsync("-aH", "alpha:"+dst+"/", back+"/")
	for _, d := range []string{dst, back} {
		if _, err := os.Lstat(filepath.Join(d, "stale")); err == nil {
			t.Errorf("%s: --delete left stale", d)
		}
		if l, err := os.Readlink(filepath.Join(d, "dangling")); err != nil || l != "/nonexistent" {
			t.Errorf("%s: dangling symlink %q, %v", d, l, err)
		}
		a, err1 := os.Stat(filepath.Join(d, "a.txt"))
		h, err2 := os.Stat(filepath.Join(d, "hard"))
		if err1 != nil || err2 != nil || !os.SameFile(a, h) || a.Mode().Perm() != 0o640 {
			t.Errorf("%s: hard link or mode lost: %v %v %v", d, a, err1, err2)
		}
		if fi, err := os.Stat(filepath.Join(d, "sub")); err != nil || fi.Mode().Perm() != 0o751 {
			t.Errorf("%s: sub: %v %v", d, fi, err)
		}
		if b, err := os.ReadFile(filepath.Join(d, "sub", "sp ace ü")); err != nil || string(b) != "x" {
			t.Errorf("%s: odd name: %q %v", d, b, err)
		}
	}

	// --partial cut off: ssh (rsync's -e, through a script that records
	// its pid) is killed while the transfer runs, as a dropped connection.
	data := make([]byte, 16<<20)
	_, _ = rand.Read(data)
	big := filepath.Join(dir, "big")
	must(t, os.WriteFile(big, data, 0o644))
	pidFile := filepath.Join(dir, "ssh.pid")
	wrapper := filepath.Join(dir, "ssh-wrapper")
	must(t, os.WriteFile(wrapper, []byte("#!/bin/sh\necho $$ > "+pidFile+"\nexec ssh \"$@\"\n"), 0o755))
	cmd := exec.CommandContext(ctx, "rsync", "-e", wrapper+" -F "+cfg, "--partial", "--bwlimit=1024", big, "alpha:"+dst+"/")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	temp := waitFor(t, "rsync's temporary file on the host", func() (string, bool) {
		m, _ := filepath.Glob(filepath.Join(dst, ".big.*"))
		if len(m) == 1 {
			if fi, err := os.Stat(m[0]); err == nil && fi.Size() > 0 {
				return m[0], true
			}
		}
		return "", false
	})
	b, err := os.ReadFile(pidFile)
	must(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	must(t, err)
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	if err := cmd.Wait(); err == nil {
		t.Fatalf("rsync succeeded although its ssh was killed:\n%s", out.String())
	}
	kept := filepath.Join(dst, "big")
	waitFor(t, "the partial file kept as "+kept+" (its temporary file "+temp+" removed)", func() (string, bool) {
		_, errTemp := os.Lstat(temp)
		_, errKept := os.Lstat(kept)
		return "", os.IsNotExist(errTemp) && errKept == nil
	})
	part, err := os.ReadFile(kept)
	must(t, err)
	if len(part) == 0 || len(part) >= len(data) || !bytes.Equal(part, data[:len(part)]) {
		t.Fatalf("partial file: %d bytes, not a proper prefix of the %d sent", len(part), len(data))
	}
	rsync("--partial", big, "alpha:"+dst+"/")
	if got, err := os.ReadFile(kept); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("resumed file differs (%d bytes, %v)", len(got), err)
	}
}

// TestSSHStdioForwardRefused: `ssh -W` (and -L, -D) to a port nothing
// listens on says why, in sshd's words. The agent answered "connect
// failed" for every cause, so ssh printed "connect failed: connect failed".
func TestSSHStdioForwardRefused(t *testing.T) {
	testenv.RequirePeer(t, "OpenSSH ssh", lookPath("ssh"))
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	ctx := testCtx(t, time.Minute)
	cfg := sshConfig(t, g, "alpha", t.TempDir())
	out, err := exec.CommandContext(ctx, "ssh", "-F", cfg, "-W", testenv.RefusedAddr(t), "alpha").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "open failed: connect failed: Connection refused") {
		t.Fatalf("ssh -W to a closed port: %v\n%s", err, out)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond (every 20 ms, for at most 30 s) until it holds and
// returns its value.
func waitFor(t testing.TB, what string, cond func() (string, bool)) string {
	t.Helper()
	for range 1500 {
		if v, ok := cond(); ok {
			return v
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
	return ""
}

// TestSFTPListingThroughGateway: OpenSSH's sftp `ls -la` of a directory on
// a host lists "." and "..", and its long lines pad the day to two columns
// ("Jan  5  2020"), as against sshd. The agent's SFTP server listed
// neither "." nor ".." (`ls -la` in an sshfs mount showed them missing
// too), and wrote "Jan 5  2020", so the columns shifted between the 9th
// and the 10th of a month.
func TestSFTPListingThroughGateway(t *testing.T) {
	testenv.RequirePeer(t, "OpenSSH sftp", lookPath("sftp"))
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	ctx := testCtx(t, time.Minute)
	cfg := sshConfig(t, g, "alpha", t.TempDir())
	remote := t.TempDir()
	f := filepath.Join(remote, "old file")
	must(t, os.WriteFile(f, []byte("x"), 0o644))
	old := time.Date(2020, 1, 5, 12, 0, 0, 0, time.Local)
	must(t, os.Chtimes(f, old, old))
	cmd := exec.CommandContext(ctx, "sftp", "-F", cfg, "-b", "-", "alpha")
	cmd.Stdin = strings.NewReader("cd " + remote + "\nls -la\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sftp: %v\n%s", err, out)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "sftp>") || strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		names = append(names, f[len(f)-1])
		if strings.HasSuffix(line, "old file") && !strings.Contains(line, " Jan  5  2020 old file") {
			t.Errorf("long line %q, want the date as \"Jan  5  2020\"", line)
		}
	}
	if strings.Join(names, " ") != ". .. file" {
		t.Errorf("ls -la listed %q, want . .. and the file\n%s", names, out)
	}
}

// TestSSHUnixSocketForwardsThroughGateway: ssh -L /local.sock:/host.sock
// and -R /host.sock:HOST:PORT through the gateway, as against sshd (a
// Docker or database socket on the host, a local service offered to the
// host's programs as a socket). The agent refused both.
func TestSSHUnixSocketForwardsThroughGateway(t *testing.T) {
	testenv.RequirePeer(t, "OpenSSH ssh", lookPath("ssh"))
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	ctx := testCtx(t, time.Minute)
	dir := t.TempDir()
	cfg := sshConfig(t, g, "alpha", dir)
	// The host's socket and this machine's echo server (the same machine
	// here: the agent runs beside the test).
	hostSock := filepath.Join(dir, "host.sock")
	ln, err := net.Listen("unix", hostSock)
	must(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	echo := echoServer(t)
	localSock := filepath.Join(dir, "local.sock")
	remoteSock := filepath.Join(dir, "remote.sock")
	// The remote command talks to -R's socket on the host; -L's socket is
	// used from here while the command runs.
	cmd := exec.CommandContext(ctx, "ssh", "-F", cfg, "-o", "ExitOnForwardFailure=yes",
		"-L", localSock+":"+hostSock, "-R", remoteSock+":"+echo, "alpha",
		"ls -l "+remoteSock+"; read line; echo done")
	stdin, err := cmd.StdinPipe()
	must(t, err)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	waitFor(t, "ssh's -L socket and -R's on the host", func() (string, bool) {
		_, err1 := os.Stat(localSock)
		_, err2 := os.Stat(remoteSock)
		return "", err1 == nil && err2 == nil
	})
	for _, sock := range []string{localSock, remoteSock} {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatalf("%s: %v\n%s", sock, err, out.String())
		}
		if _, err := c.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping\n" {
			t.Fatalf("through %s: %q %v", sock, buf, err)
		}
		_ = c.Close()
	}
	_, _ = stdin.Write([]byte("\n"))
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), "srw-------") {
		t.Fatalf("ssh: %v\n%s", err, out.String())
	}
}

// TestSSHAgentForwardsThroughGateway: ssh -A through `gateway proxy` to a
// machine's agent, with the README's config block, forwards the caller's
// SSH agent as sshd does: on the host, ssh-add -l lists the caller's key
// and ssh-keygen signs with it, a signature that checks here, while the
// key stays on this side. Without -A the command has no SSH_AUTH_SOCK.
// The agent refused every auth-agent-req@openssh.com.
func TestSSHAgentForwardsThroughGateway(t *testing.T) {
	testenv.RequirePeer(t, "OpenSSH ssh", lookPath("ssh"))
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	ctx := testCtx(t, time.Minute)
	dir := t.TempDir()
	cfg := sshConfig(t, g, "alpha", dir)
	if !certPermits(t, dir, "permit-agent-forwarding") {
		t.Error("a machine's certificate does not permit agent forwarding")
	}
	ag := sshdtest.StartAgent(t, ctx, dir)
	data := filepath.Join(dir, "data")
	must(t, os.WriteFile(data, []byte("signed on the host\n"), 0o600))
	ssh := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "ssh", append([]string{"-F", cfg}, args...)...)
		cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK="+ag.Sock)
		return cmd
	}
	out, err := ssh("-A", "alpha", "ssh-add -l && "+ag.SignCommand(data)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), ag.Listed()) {
		t.Fatalf("ssh -A: %v, want ssh-add -l to list %s:\n%s", err, ag.Listed(), out)
	}
	ag.CheckSignature(t, ctx, data)
	out, err = ssh("alpha", `echo "sock=[$SSH_AUTH_SOCK]"`).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "sock=[]") {
		t.Errorf("ssh without -A: %v %q, want no SSH_AUTH_SOCK", err, out)
	}

	// The Go client does the same with Options.ForwardAgent.
	c, err := client.New(g.url, g.admin, &client.Options{ForwardAgent: func() (net.Conn, error) { return net.Dial("unix", ag.Sock) }})
	must(t, err)
	h, err := c.Dial(ctx, "alpha")
	must(t, err)
	defer func() { _ = h.Close() }()
	res, err := h.Exec(ctx, []string{"ssh-add", "-l"}, hostgate.ExecOptions{})
	if err != nil || !strings.Contains(string(res.Stdout), ag.Listed()) {
		t.Errorf("Go client with ForwardAgent: %v %q %q, want ssh-add -l to list %s", err, res.Stdout, res.Stderr, ag.Listed())
	}
}
