//go:build linux

package sshlayer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
)

// These tests drive the server with OpenSSH's own clients (ssh, sftp, scp)
// as a user would.

// srvOpenSSH holds the files an OpenSSH client needs to reach a server.
type srvOpenSSH struct {
	t          *testing.T
	dir        string
	key        string // private key file
	knownHosts string
	port       int
}

func srvNeedOpenSSH(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		_, err := exec.LookPath(tool)
		testenv.RequirePeer(t, "OpenSSH "+tool, err == nil)
	}
}

func srvNewOpenSSH(t *testing.T, port int, hostKey ssh.PublicKey, clientKey []byte) *srvOpenSSH {
	t.Helper()
	srvNeedOpenSSH(t, "ssh")
	dir := t.TempDir()
	o := &srvOpenSSH{t: t, dir: dir, key: filepath.Join(dir, "id"), knownHosts: filepath.Join(dir, "known_hosts"), port: port}
	if err := os.WriteFile(o.key, clientKey, 0o600); err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("[127.0.0.1]:%d %s", port, ssh.MarshalAuthorizedKey(hostKey))
	if err := os.WriteFile(o.knownHosts, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return o
}

// opts are the options every OpenSSH tool gets: no user config, our pinned
// host key only, never a prompt.
func (o *srvOpenSSH) opts() []string {
	return []string{
		"-F", "/dev/null",
		"-o", "UserKnownHostsFile=" + o.knownHosts,
		"-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "StrictHostKeyChecking=yes",
		"-o", "BatchMode=yes",
		"-o", "IdentitiesOnly=yes",
		"-o", "IdentityAgent=none",
		"-i", o.key,
	}
}

// command builds an OpenSSH command bound to the test's lifetime.
func (o *srvOpenSSH) command(ctx context.Context, tool string, args ...string) *exec.Cmd {
	var all []string
	all = append(all, o.opts()...)
	switch tool {
	case "ssh":
		all = append(all, "-p", strconv.Itoa(o.port), "-l", "hostgate")
	default: // sftp, scp
		all = append(all, "-P", strconv.Itoa(o.port))
	}
	all = append(all, args...)
	cmd := exec.CommandContext(ctx, tool, all...)
	cmd.WaitDelay = srvTestWait
	return cmd
}

func srvTestCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*srvTestWait)
	t.Cleanup(cancel)
	return ctx
}

func srvOpenSSHServer(t *testing.T, cfg *ServerConfig) (*TestServer, *srvOpenSSH) {
	t.Helper()
	ts := srvStartServer(t, cfg)
	return ts, srvNewOpenSSH(t, ts.Port, ts.HostPublicKey, ts.ClientKey)
}

// srvSFTPServer starts a server in a new directory, which it returns with
// a function that runs an sftp batch script (given on stdin) against it
// and fails the test if sftp does.
func srvSFTPServer(t *testing.T) (remote string, sftp func(script string) string) {
	t.Helper()
	srvNeedOpenSSH(t, "sftp")
	remote = t.TempDir()
	_, o := srvOpenSSHServer(t, &ServerConfig{Dir: remote})
	return remote, func(script string) string {
		t.Helper()
		cmd := o.command(srvTestCtx(t), "sftp", "-b", "-", "hostgate@127.0.0.1")
		cmd.Stdin = strings.NewReader(script)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("sftp %q: %v\n%s", script, err, out)
		}
		return string(out)
	}
}

func TestOpenSSHExec(t *testing.T) {
	t.Parallel()
	_, o := srvOpenSSHServer(t, nil)
	cmd := o.command(srvTestCtx(t), "ssh", "127.0.0.1", "echo out; echo err >&2; exit 42")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 42 {
		t.Fatalf("ssh: %v, want exit code 42; stderr %q", err, stderr.String())
	}
	if stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Errorf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	out, err := o.command(srvTestCtx(t), "ssh", "127.0.0.1", "true").CombinedOutput()
	if err != nil {
		t.Fatalf("ssh true: %v %s", err, out)
	}
}

func TestOpenSSHPTY(t *testing.T) {
	t.Parallel()
	_, o := srvOpenSSHServer(t, nil)
	out, err := o.command(srvTestCtx(t), "ssh", "-tt", "127.0.0.1", "tty; echo TERM=$TERM; exit 3").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("ssh -tt: %v, want exit 3; output %q", err, out)
	}
	if !regexp.MustCompile(`/dev/pts/\d+\r?\n`).Match(out) || !bytes.Contains(out, []byte("TERM=")) {
		t.Errorf("ssh -tt output %q: want the tty name /dev/pts/N", out)
	}
}

func srvRandomFile(t *testing.T, path string, size int) []byte {
	t.Helper()
	data := make([]byte, size)
	_, _ = rand.Read(data)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return data
}

func srvSameFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes, not the %d bytes sent", path, len(got), len(want))
	}
}

// TestOpenSSHSFTP: OpenSSH's sftp puts, renames, lists and gets a 20 MB
// file (the size issue 2 names; well past the 2 MiB channel window), bytes
// unchanged.
func TestOpenSSHSFTP(t *testing.T) {
	t.Parallel()
	srvNeedOpenSSH(t, "sftp")
	remote := t.TempDir()
	_, o := srvOpenSSHServer(t, &ServerConfig{Dir: remote})
	local := t.TempDir()
	data := srvRandomFile(t, filepath.Join(local, "src.bin"), 20<<20)
	batch := filepath.Join(local, "batch")
	// ln -s with a relative target, and cd through a symlink (sftp asks
	// the server's realpath), as OpenSSH's sftp-server answers them.
	script := fmt.Sprintf("put %s up.bin\nrename up.bin moved.bin\nls -l\nget moved.bin %s\nln -s moved.bin link.bin\nmkdir sub\nln -s sub subl\ncd subl\npwd\n",
		filepath.Join(local, "src.bin"), filepath.Join(local, "back.bin"))
	if err := os.WriteFile(batch, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := o.command(srvTestCtx(t), "sftp", "-b", batch, "hostgate@127.0.0.1").CombinedOutput()
	if err != nil {
		t.Fatalf("sftp: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("moved.bin")) || !bytes.Contains(out, []byte(strconv.Itoa(20<<20))) {
		t.Errorf("sftp ls output lacks moved.bin and its size:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(remote, "up.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("up.bin still there after rename: %v", err)
	}
	srvSameFile(t, filepath.Join(remote, "moved.bin"), data)
	srvSameFile(t, filepath.Join(local, "back.bin"), data)
	if l, err := os.Readlink(filepath.Join(remote, "link.bin")); err != nil || l != "moved.bin" {
		t.Errorf("ln -s made %q (%v), want a link to moved.bin as typed", l, err)
	}
	if want := "Remote working directory: " + filepath.Join(remote, "sub") + "\n"; !bytes.Contains(out, []byte(want)) {
		t.Errorf("pwd after cd through a symlink: want %q in\n%s", want, out)
	}
	// expand-path@openssh.com is offered (OpenSSH 9.2's sftp does not use
	// it for cd ~; newer ones do).
	out, err = o.command(srvTestCtx(t), "sftp", "-vv", "-b", "/dev/null", "hostgate@127.0.0.1").CombinedOutput()
	if err != nil {
		t.Fatalf("sftp -vv: %v\n%s", err, out)
	}
	if want := `Server supports extension "expand-path@openssh.com"`; !bytes.Contains(out, []byte(want)) {
		t.Errorf("want %q in\n%s", want, out)
	}
}

// TestOpenSSHSFTPRmdirKeepsFiles: OpenSSH's sftp `rmdir FILE` deleted the
// file and `rm DIR` the directory (pkg/sftp's server does both with
// os.Remove); against OpenSSH's sftp-server each fails and deletes
// nothing, and so it does here.
func TestOpenSSHSFTPRmdirKeepsFiles(t *testing.T) {
	t.Parallel()
	remote, sftpBatch := srvSFTPServer(t)
	file, dir := filepath.Join(remote, "file"), filepath.Join(remote, "dir")
	if err := os.WriteFile(file, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// "-": a failing command does not end the batch.
	out := sftpBatch("-rmdir file\n-rm dir\n")
	for _, want := range []string{`remote rmdir "` + file + `": No such file or directory`, "remote delete " + dir + ": Failure"} {
		if !strings.Contains(out, want) {
			t.Errorf("sftp output lacks %q (OpenSSH's sftp-server's answer):\n%s", want, out)
		}
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("sftp rmdir on a file deleted it: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("sftp rm on a directory deleted it: %v", err)
	}
	sftpBatch("rm file\nrmdir dir\n")
	for _, p := range []string{file, dir} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there after rm and rmdir: %v", p, err)
		}
	}
}

// TestOpenSSHSFTPNamesOwners: OpenSSH's sftp (9.1 and later) formats
// `ls -l FILE` itself and asks the server to name the owner
// (users-groups-by-id@openssh.com); pkg/sftp lacks the extension, so it
// showed "0 0" where sshd shows "root root".
func TestOpenSSHSFTPNamesOwners(t *testing.T) {
	t.Parallel()
	remote, sftpBatch := srvSFTPServer(t)
	if err := os.WriteFile(filepath.Join(remote, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	me, err := user.Current()
	if err != nil {
		t.Skipf("no name for this uid: %v", err)
	}
	group, err := user.LookupGroupId(me.Gid)
	if err != nil {
		t.Skipf("no name for this gid: %v", err)
	}
	out := sftpBatch("ls -l file\n")
	if !regexp.MustCompile(`\s` + regexp.QuoteMeta(me.Username) + `\s+` + regexp.QuoteMeta(group.Name) + `\s+1 `).MatchString(out) {
		t.Errorf("ls -l does not name the owner %s and group %s:\n%s", me.Username, group.Name, out)
	}
}

func TestOpenSSHSCP(t *testing.T) {
	t.Parallel()
	srvNeedOpenSSH(t, "scp")
	remote := t.TempDir()
	_, o := srvOpenSSHServer(t, &ServerConfig{Dir: remote})
	local := t.TempDir()
	data := srvRandomFile(t, filepath.Join(local, "src.bin"), 3<<20)
	// Default scp speaks SFTP; -O is the legacy protocol (remote `scp -t`).
	for _, mode := range [][]string{nil, {"-O"}} {
		name := "sftp"
		if mode != nil {
			name = "legacy"
		}
		up := append(append([]string{}, mode...), filepath.Join(local, "src.bin"), "hostgate@127.0.0.1:"+name+".bin")
		if out, err := o.command(srvTestCtx(t), "scp", up...).CombinedOutput(); err != nil {
			t.Fatalf("scp %s upload: %v\n%s", name, err, out)
		}
		srvSameFile(t, filepath.Join(remote, name+".bin"), data)
		down := append(append([]string{}, mode...), "hostgate@127.0.0.1:"+name+".bin", filepath.Join(local, name+".back"))
		if out, err := o.command(srvTestCtx(t), "scp", down...).CombinedOutput(); err != nil {
			t.Fatalf("scp %s download: %v\n%s", name, err, out)
		}
		srvSameFile(t, filepath.Join(local, name+".back"), data)
	}
}

// srvStartReady starts an ssh command that prints "ready" remotely and
// then sleeps; it returns once "ready" arrived, with stderr's reader.
func srvStartReady(t *testing.T, cmd *exec.Cmd) *bufio.Reader {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	errR := bufio.NewReader(stderr)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		rest, _ := io.ReadAll(errR)
		t.Fatalf("ssh did not get ready: %q %v; stderr %s", line, err, rest)
	}
	return errR
}

func TestOpenSSHLocalForward(t *testing.T) {
	t.Parallel()
	_, o := srvOpenSSHServer(t, nil)
	echo := srvStartEcho(t)
	// A Unix socket as the local end: no port to pick and race for. ssh
	// sets up -L before it opens the session, so "ready" means listening.
	sock := filepath.Join(o.dir, "l.sock")
	cmd := o.command(srvTestCtx(t), "ssh", "-o", "ExitOnForwardFailure=yes",
		"-L", sock+":"+echo, "127.0.0.1", "echo ready; exec sleep 300")
	srvStartReady(t, cmd)
	for range 3 {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		srvEchoRoundTrip(t, conn)
		_ = conn.Close()
	}
}

// allocatedPort reads ssh's stderr up to the port the server picked for a
// -R 0, which ssh reports there.
func allocatedPort(t *testing.T, errR *bufio.Reader) string {
	t.Helper()
	re := regexp.MustCompile(`Allocated port (\d+) for remote forward`)
	for {
		line, err := errR.ReadString('\n')
		if err != nil {
			t.Fatalf("no allocated port reported: %v", err)
		}
		if m := re.FindStringSubmatch(line); m != nil {
			return m[1]
		}
	}
}

func TestOpenSSHRemoteForward(t *testing.T) {
	t.Parallel()
	_, o := srvOpenSSHServer(t, nil)
	echo := srvStartEcho(t)
	cmd := o.command(srvTestCtx(t), "ssh", "-o", "ExitOnForwardFailure=yes",
		"-R", "0:"+echo, "127.0.0.1", "echo ready; exec sleep 300")
	port := allocatedPort(t, srvStartReady(t, cmd))
	// -R PORT:… is sshd's "localhost": 127.0.0.1 and ::1 (where the
	// machine has it). Only 127.0.0.1 was listened on, so a program on the
	// host that tried ::1 for localhost alone found nothing.
	hosts := []string{"127.0.0.1"}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		_ = ln.Close()
		hosts = append(hosts, "::1")
	}
	for _, host := range hosts {
		for range 3 {
			conn, err := net.Dial("tcp", net.JoinHostPort(host, port))
			if err != nil {
				t.Fatalf("the forward on %s: %v", host, err)
			}
			srvEchoRoundTrip(t, conn)
			_ = conn.Close()
		}
	}
}

// TestOpenSSHKilledClientKillsProcessGroup: when the ssh client dies, the
// remote command and the grandchild it forked (which ignores SIGHUP) go.
func TestOpenSSHKilledClientKillsProcessGroup(t *testing.T) {
	t.Parallel()
	_, o := srvOpenSSHServer(t, &ServerConfig{KillGrace: 200 * time.Millisecond})
	cmd := o.command(srvTestCtx(t), "ssh", "127.0.0.1", `trap '' HUP; sleep 300 & echo $$ $!; wait`)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var leader, grandchild int
	if _, err := fmt.Sscan(line, &leader, &grandchild); err != nil {
		t.Fatalf("pids %q: %v", line, err)
	}
	if !testenv.Alive(grandchild) {
		t.Fatal("grandchild not running")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	testenv.WaitGone(t, leader, srvTestWait)
	testenv.WaitGone(t, grandchild, srvTestWait)
}

func TestOpenSSHUnknownKeyRefused(t *testing.T) {
	t.Parallel()
	ts := srvStartServer(t, nil)
	_, otherPEM, err := newEd25519Signer()
	if err != nil {
		t.Fatal(err)
	}
	o := srvNewOpenSSH(t, ts.Port, ts.HostPublicKey, otherPEM)
	out, err := o.command(srvTestCtx(t), "ssh", "127.0.0.1", "echo should-not-run").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 255 || !bytes.Contains(out, []byte("Permission denied")) {
		t.Fatalf("unknown key: %v %q, want exit 255 and Permission denied", err, out)
	}
	if bytes.Contains(out, []byte("should-not-run")) {
		t.Fatal("command ran")
	}
}

// TestOpenSSHWrongHostKey: a client pinning another host key refuses us.
func TestOpenSSHWrongHostKey(t *testing.T) {
	t.Parallel()
	ts := srvStartServer(t, nil)
	other, _, _ := newEd25519Signer()
	o := srvNewOpenSSH(t, ts.Port, other.PublicKey(), ts.ClientKey)
	out, err := o.command(srvTestCtx(t), "ssh", "127.0.0.1", "true").CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("HOST IDENTIFICATION HAS CHANGED")) {
		t.Fatalf("wrong pinned host key: %v %q", err, out)
	}
}

func TestOpenSSHCertificate(t *testing.T) {
	t.Parallel()
	ca, _, _ := newEd25519Signer()
	ts := srvStartServer(t, &ServerConfig{TrustedUserCAs: []ssh.PublicKey{ca.PublicKey()}, Principal: "host-1"})
	for _, tc := range []struct {
		principal string
		ok        bool
	}{{"host-1", true}, {"host-2", false}} {
		key, keyPEM, _ := newEd25519Signer()
		o := srvNewOpenSSH(t, ts.Port, ts.HostPublicKey, keyPEM)
		cert := srvSignCert(t, ca, key.PublicKey(), func(c *ssh.Certificate) { c.ValidPrincipals = []string{tc.principal} })
		certFile := filepath.Join(o.dir, "id-cert.pub")
		if err := os.WriteFile(certFile, ssh.MarshalAuthorizedKey(cert), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := o.command(srvTestCtx(t), "ssh", "-o", "CertificateFile="+certFile, "127.0.0.1", "echo in").CombinedOutput()
		if got := err == nil && strings.Contains(string(out), "in"); got != tc.ok {
			t.Errorf("principal %s: ok=%v (%v %q), want ok=%v", tc.principal, got, err, out, tc.ok)
		}
	}
}

// TestOpenSSHSFTPListsAsSFTPServer: OpenSSH's sftp shows `ls -l`, `ls
// -la`, `ls -ln` and `ls -l FILE` of our server as it shows them of
// OpenSSH's own sftp-server (run by `sftp -D`) over the same directory,
// line for line: the "?" in the link count column is the client's for
// both (OpenSSH 9.1 and later format the listing themselves when the
// server offers users-groups-by-id@openssh.com, and SFTP version 3's
// attributes carry no link count).
func TestOpenSSHSFTPListsAsSFTPServer(t *testing.T) {
	t.Parallel()
	sftpServer := "/usr/lib/openssh/sftp-server"
	if _, err := os.Stat(sftpServer); err != nil {
		testenv.RequirePeer(t, "OpenSSH sftp-server", false)
	}
	remote, sftpBatch := srvSFTPServer(t)
	if err := os.WriteFile(filepath.Join(remote, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(remote, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("file", filepath.Join(remote, "link")); err != nil {
		t.Fatal(err)
	}
	// An old file shows its year, not its time.
	old := time.Date(2020, 5, 1, 12, 0, 0, 0, time.Local)
	if err := os.Chtimes(filepath.Join(remote, "file"), old, old); err != nil {
		t.Fatal(err)
	}
	script := "cd " + remote + "\nls -l\nls -la\nls -ln\nls -l file\nls -l sub\n"
	ours := sftpBatch(script)
	cmd := exec.CommandContext(srvTestCtx(t), "sftp", "-D", sftpServer, "-b", "-")
	cmd.Stdin = strings.NewReader(script)
	theirs, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sftp -D sftp-server: %v\n%s", err, theirs)
	}
	if ours != string(theirs) {
		t.Errorf("sftp's listings differ:\nours:\n%s\nsftp-server's:\n%s", ours, theirs)
	}
}

// TestOpenSSHSFTPCopy: OpenSSH's sftp `cp` copies a file on the server
// (the copy-data extension, which its sftp-server has offered since 9.0);
// against the agent it failed with "Server does not support copy-data
// extension" and sftp -b stopped there.
func TestOpenSSHSFTPCopy(t *testing.T) {
	t.Parallel()
	remote, sftp := srvSFTPServer(t)
	data := srvRandomFile(t, filepath.Join(remote, "src.bin"), 3<<20+17)
	if err := os.WriteFile(filepath.Join(remote, "old.bin"), bytes.Repeat([]byte("x"), 5<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	// Onto a new file, and over a longer one, which OpenSSH truncates.
	sftp("cp src.bin copy.bin\ncp src.bin old.bin\n")
	srvSameFile(t, filepath.Join(remote, "copy.bin"), data)
	srvSameFile(t, filepath.Join(remote, "old.bin"), data)
	fi, err := os.Stat(filepath.Join(remote, "copy.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 { // srvRandomFile's, kept as sftp's cp asks
		t.Errorf("copy's mode %v, want the source's 0600", fi.Mode().Perm())
	}
}

// TestOpenSSHSFTPPutFsync: OpenSSH's sftp `put -f` asks the server to
// flush the file to disk (fsync@openssh.com), as sshfs does for fsync(2).
// The agent's server did not offer the extension, so sftp skipped the
// request without a word and the upload succeeded unsynced; sshd's
// sftp-server offers and answers it.
func TestOpenSSHSFTPPutFsync(t *testing.T) {
	t.Parallel()
	srvNeedOpenSSH(t, "sftp")
	remote := t.TempDir()
	_, o := srvOpenSSHServer(t, &ServerConfig{Dir: remote})
	local := t.TempDir()
	data := srvRandomFile(t, filepath.Join(local, "src.bin"), 1<<20+3)
	cmd := o.command(srvTestCtx(t), "sftp", "-vvv", "-b", "-", "hostgate@127.0.0.1")
	cmd.Stdin = strings.NewReader("put -f " + filepath.Join(local, "src.bin") + " up.bin\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sftp put -f: %v\n%s", err, out)
	}
	srvSameFile(t, filepath.Join(remote, "up.bin"), data)
	if !bytes.Contains(out, []byte("Sent message fsync@openssh.com")) || bytes.Contains(out, []byte("Couldn't sync file")) {
		t.Errorf("sftp put -f did not have the file synced (want fsync@openssh.com sent and answered):\n%s", out)
	}
}

// TestOpenSSHSFTPLsetstat: OpenSSH's sftp `chmod -h`, `chgrp -h` and
// `chown -h` (lsetstat@openssh.com, which its sftp-server offers) set the
// path itself, a symlink and not its target; a symlink's mode, which
// Linux cannot change, fails as under sshd ("Failure"). Against the
// agent each said "Server does not support lsetstat@openssh.com
// extension" and sftp -b stopped there.
func TestOpenSSHSFTPLsetstat(t *testing.T) {
	t.Parallel()
	remote, sftp := srvSFTPServer(t)
	file := filepath.Join(remote, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("file", filepath.Join(remote, "link")); err != nil {
		t.Fatal(err)
	}
	out := sftp(fmt.Sprintf("chmod -h 600 file\nchgrp -h %d link\nchown -h %d link\n-chmod -h 700 link\n", os.Getgid(), os.Getuid()))
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("chmod -h 600 file: mode %v (%v), want 0600 (a symlink's chmod must not reach it)\n%s", fi.Mode(), err, out)
	}
	if want := `remote lsetstat "` + filepath.Join(remote, "link") + `": Failure`; !strings.Contains(out, want) {
		t.Errorf("chmod -h of a symlink: want %q, as sshd says, in\n%s", want, out)
	}
}

// TestOpenSSHMissingHome: a server whose home directory (Dir) is not
// there, as a system user's often is not, runs commands, terminals and
// SFTP sessions in "/" and says why on stderr, as sshd does. Every
// command failed ("exec request failed on channel 0") and OpenSSH's sftp
// gave up ("Need cwd").
func TestOpenSSHMissingHome(t *testing.T) {
	t.Parallel()
	srvNeedOpenSSH(t, "sftp")
	home := filepath.Join(t.TempDir(), "gone")
	_, o := srvOpenSSHServer(t, &ServerConfig{Dir: home})
	why := "Could not chdir to home directory " + home + ": No such file or directory"

	cmd := o.command(srvTestCtx(t), "ssh", "127.0.0.1", "pwd")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stdout.String() != "/\n" {
		t.Errorf("ssh pwd: %v, stdout %q, want \"/\\n\"; stderr %q", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), why) {
		t.Errorf("ssh pwd's stderr %q lacks %q", stderr.String(), why)
	}

	out, err := o.command(srvTestCtx(t), "ssh", "-tt", "127.0.0.1", "pwd").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(why+"\r\n")) || !bytes.Contains(out, []byte("\n/\r\n")) {
		t.Errorf("ssh -tt pwd: %v, output %q, want %q and then /", err, out, why)
	}

	cmd = o.command(srvTestCtx(t), "sftp", "-b", "-", "hostgate@127.0.0.1")
	cmd.Stdin = strings.NewReader("pwd\n")
	out, err = cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("Remote working directory: /\n")) || !bytes.Contains(out, []byte(why)) {
		t.Errorf("sftp pwd: %v, output:\n%s\nwant the working directory / and %q", err, out, why)
	}
}

// srvOpenSSHVersionServer is srvOpenSSHServer with the server announcing
// version instead of hostgate's own: OpenSSH's ssh sends some requests
// only to a server it takes for OpenSSH's sshd.
func srvOpenSSHVersionServer(t *testing.T, version string) *srvOpenSSH {
	t.Helper()
	hostSigner, _, err := newEd25519Signer()
	if err != nil {
		t.Fatal(err)
	}
	clientSigner, clientPEM, err := newEd25519Signer()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(&ServerConfig{
		HostKey:        hostSigner,
		AuthorizedKeys: []ssh.PublicKey{clientSigner.PublicKey()},
		Logger:         slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.sshCfg.ServerVersion = version // before Serve, which reads it
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = srv.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; err != nil && !errors.Is(err, ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return srvNewOpenSSH(t, ln.Addr().(*net.TCPAddr).Port, hostSigner.PublicKey(), clientPEM)
}

// TestOpenSSHNoMoreSessions: OpenSSH's ssh, talking to a server it takes
// for sshd, opens its session and sends no-more-sessions@openssh.com right
// behind the open; the session is served. The server handled the request
// before the open and refused the session ("open failed: administratively
// prohibited: no more sessions"), most of the time.
func TestOpenSSHNoMoreSessions(t *testing.T) {
	t.Parallel()
	o := srvOpenSSHVersionServer(t, "SSH-2.0-OpenSSH_9.9")
	for i := range 5 {
		cmd := o.command(srvTestCtx(t), "ssh", "-v", "127.0.0.1", "echo served")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if !strings.Contains(stderr.String(), "Requesting no-more-sessions@openssh.com") {
			t.Fatalf("run %d: ssh sent no no-more-sessions@openssh.com, which the test is about; stderr:\n%s", i, stderr.String())
		}
		if err != nil || stdout.String() != "served\n" {
			t.Fatalf("run %d: ssh: %v, stdout %q, want \"served\\n\"; stderr:\n%s", i, err, stdout.String(), stderr.String())
		}
	}
}

// TestOpenSSHEndOfWrite: `ssh host yes | head -1` ends, as against sshd.
// ssh, whose stdout reader went, drops what it is sent and tells the
// server with eow@openssh.com, but only a server it takes for OpenSSH
// (serverVersion): before, the server was "hostgate", which ssh never
// told, and yes ran on, and ssh with it, for ever.
func TestOpenSSHEndOfWrite(t *testing.T) {
	t.Parallel()
	_, o := srvOpenSSHServer(t, nil)
	ctx := srvTestCtx(t)
	cmd := o.command(ctx, "ssh", "-v", "127.0.0.1", "yes")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "y\n" {
		t.Fatalf("first line %q %v", line, err)
	}
	_ = stdout.Close() // head -1 exits
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("ssh ran on after the reader of its stdout went: killed at the test's deadline; stderr:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "compat_banner: match: OpenSSH.hostgate") {
		t.Errorf("ssh did not take the server for OpenSSH, which the test is about; stderr:\n%s", stderr.String())
	}
	t.Logf("ssh: %v", err)
}

// TestOpenSSHPTYDisabledChars: a control character the user's terminal
// has disabled (eol and eol2 are, on every Linux terminal by default) is
// disabled on the session's terminal too, as sshd leaves it. OpenSSH's
// ssh sends a disabled character as 255; the server set it as the byte
// 0xff (stty: "eol = M-^?"), so a 0xff typed or pasted ended a line.
func TestOpenSSHPTYDisabledChars(t *testing.T) {
	t.Parallel()
	_, o := srvOpenSSHServer(t, nil)
	// ssh sends the modes of its own terminal: it needs one.
	cmd := o.command(srvTestCtx(t), "ssh", "-t", "127.0.0.1", "stty -a")
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ptmx.Close() }()
	out, _ := io.ReadAll(ptmx) // EIO once ssh and its terminal are gone
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ssh -t stty -a: %v\n%s", err, out)
	}
	for _, want := range []string{"eol = <undef>;", "eol2 = <undef>;"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("stty -a on the session's terminal lacks %q:\n%s", want, out)
		}
	}
}

// TestOpenSSHKilledBySignal: OpenSSH's ssh exits 255 for a command a
// signal killed, as against sshd, whichever the signal. One without a
// name in RFC 4254 (XCPU past ulimit -t, XFSZ past ulimit -f, SYS from
// seccomp) was reported as exit status 128+N, so ssh exited 152 as if the
// command had exited so.
// hostgate's own client is still told 128+N, which the gateway's
// executions answer and older gateways know no signal name for.
func TestOpenSSHKilledBySignal(t *testing.T) {
	t.Parallel()
	ts, o := srvOpenSSHServer(t, nil)
	for _, sig := range []string{"TERM", "XCPU", "XFSZ", "SYS"} {
		out, err := o.command(srvTestCtx(t), "ssh", "127.0.0.1", "kill -"+sig+" $$").CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 255 {
			t.Errorf("ssh 'kill -%s $$': %v, want exit 255 as against sshd; output %q", sig, err, out)
		}
	}
	c := connectEmbedded(t, ts)
	if _, _, err := run(srvTestCtx(t), t, c, []string{"sh", "-c", "kill -XCPU $$"}, hostgate.SpawnOptions{}, ""); hostgate.ExitCode(err) != 128+int(syscall.SIGXCPU) {
		t.Errorf("hostgate's client: %v, want exit %d", err, 128+int(syscall.SIGXCPU))
	}
}
