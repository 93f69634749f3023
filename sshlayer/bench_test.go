//go:build unix

package sshlayer

import (
	"bytes"
	"context"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
)

// Benchmarks against OpenSSH's own client on the same sshd, in the same run,
// so the numbers compare as ratios:
//
//	go test -run '^$' -bench . -benchtime 20x ./sshlayer

// benchCtx outlives a long benchmark run on a loaded machine; testCtx's
// minute would cancel processes mid-transfer.
func benchCtx(b *testing.B) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	b.Cleanup(cancel)
	return ctx
}

// openSSH runs OpenSSH's ssh against s.
type openSSH struct {
	s    *sshdServer
	args []string // common arguments, before the destination
	dest string
}

func newOpenSSH(b *testing.B, s *sshdServer) *openSSH {
	b.Helper()
	sshPath, err := exec.LookPath("ssh")
	testenv.RequirePeer(b, "OpenSSH ssh", err == nil)
	host, port, _ := net.SplitHostPort(s.addr())
	dir := b.TempDir()
	known := filepath.Join(dir, "known_hosts")
	writeTestFile(b, known, []byte("["+host+"]:"+port+" "+string(ssh.MarshalAuthorizedKey(s.hostPub))))
	return &openSSH{s: s, dest: "root@" + host, args: []string{
		sshPath, "-F", "/dev/null", "-p", port, "-i", filepath.Join(s.dir, "id_ed25519"),
		"-o", "UserKnownHostsFile=" + known, "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
		"-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR",
	}}
}

func (o *openSSH) command(extra []string, remote ...string) *exec.Cmd {
	args := append(append(append([]string{}, o.args[1:]...), extra...), o.dest)
	return exec.Command(o.args[0], append(args, remote...)...)
}

// BenchmarkExecRoundTrip: `true` on an open connection. OpenSSH reuses its
// connection through a ControlMaster; each iteration still starts one ssh
// process, which is how a shell script would use it.
func BenchmarkExecRoundTrip(b *testing.B) {
	s := startSSHD(b, sshdOptions{LogLevel: "ERROR"})
	ctx := benchCtx(b)
	b.Run("hostgate", func(b *testing.B) {
		c := s.connect(b, nil)
		for b.Loop() {
			p, err := c.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{})
			if err != nil {
				b.Fatal(err)
			}
			_ = p.Stdin().Close()
			go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
			_, _ = io.Copy(io.Discard, p.Stdout())
			if err := p.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("openssh-controlmaster", func(b *testing.B) {
		o := newOpenSSH(b, s)
		ctl := filepath.Join(b.TempDir(), "ctl")
		// -f returns once the master has authenticated and listens on ctl.
		master := []string{"-o", "ControlMaster=yes", "-o", "ControlPath=" + ctl, "-o", "ControlPersist=yes", "-f", "-N"}
		if out, err := o.command(master).CombinedOutput(); err != nil {
			b.Fatalf("ssh master: %v %s", err, out)
		}
		client := []string{"-o", "ControlMaster=no", "-o", "ControlPath=" + ctl}
		b.Cleanup(func() { _ = o.command(append(client, "-O", "exit")).Run() })
		if out, err := o.command(append(client, "-O", "check")).CombinedOutput(); err != nil {
			b.Fatalf("ssh -O check: %v %s", err, out)
		}
		for b.Loop() {
			if out, err := o.command(client, "true").CombinedOutput(); err != nil {
				b.Fatalf("ssh true: %v %s", err, out)
			}
		}
	})
}

const bulkSize = 64 << 20

// BenchmarkBulk: 64 MiB into `cat >/dev/null` over a new SSH connection over
// TCP per iteration (handshake included on both sides), cipher
// aes128-gcm@openssh.com unless named.
func BenchmarkBulk(b *testing.B) {
	s := startSSHD(b, sshdOptions{LogLevel: "ERROR"})
	ctx := benchCtx(b)
	data := make([]byte, bulkSize)
	for i := range data {
		data[i] = byte(i * 7)
	}
	hostgateRun := func(b *testing.B) {
		b.SetBytes(bulkSize)
		for b.Loop() {
			c, err := Connect(ctx, s.dial(b), s.auth())
			if err != nil {
				b.Fatal(err)
			}
			p, err := c.Spawn(ctx, []string{"sh", "-c", "cat >/dev/null"}, hostgate.SpawnOptions{})
			if err != nil {
				b.Fatal(err)
			}
			go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
			go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
			if _, err := p.Stdin().Write(data); err != nil {
				b.Fatal(err)
			}
			_ = p.Stdin().Close()
			if err := p.Wait(); err != nil {
				b.Fatal(err)
			}
			_ = c.Close()
		}
	}
	b.Run("hostgate-aes128-gcm", hostgateRun)
	b.Run("hostgate-chacha20-poly1305", func(b *testing.B) {
		saved := preferredCiphers
		preferredCiphers = []string{ssh.CipherChaCha20Poly1305}
		defer func() { preferredCiphers = saved }()
		hostgateRun(b)
	})
	for _, cipher := range []string{ssh.CipherAES128GCM, ssh.CipherChaCha20Poly1305} {
		b.Run("openssh-"+cipher, func(b *testing.B) {
			o := newOpenSSH(b, s)
			b.SetBytes(bulkSize)
			for b.Loop() {
				cmd := o.command([]string{"-c", cipher}, "cat >/dev/null")
				cmd.Stdin = bytes.NewReader(data)
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("ssh: %v %s", err, out)
				}
			}
		})
	}
}

// BenchmarkCipher isolates the cipher: 64 MiB through a direct-tcpip
// channel from this client to the embedded server (Go on both ends, no
// process spawned) into a local sink, per cipher. It backs the choice of
// preferredCiphers and serverCiphers (ciphers.go); under
// GODEBUG=cpu.aes=off it measures them on a machine without AES
// instructions, its server offering every cipher all the same.
func BenchmarkCipher(b *testing.B) {
	savedHW := aesGCMHardware
	aesGCMHardware = true // NewServer's list: x/crypto's default, every cipher below
	ts, err := StartTestServer()
	aesGCMHardware = savedHW
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ts.Close() })
	sink, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	sinkDone := make(chan struct{})
	go func() {
		defer close(sinkDone)
		for {
			c, err := sink.Accept()
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, c)
			_ = c.Close()
		}
	}()
	b.Cleanup(func() { _ = sink.Close(); <-sinkDone })
	data := make([]byte, bulkSize)
	ctx := benchCtx(b)
	for _, cipher := range []string{ssh.CipherAES128GCM, ssh.CipherAES256GCM, ssh.CipherChaCha20Poly1305, ssh.CipherAES128CTR} {
		b.Run(cipher, func(b *testing.B) {
			saved := preferredCiphers
			preferredCiphers = []string{cipher}
			defer func() { preferredCiphers = saved }()
			conn, err := net.Dial("tcp", ts.Addr)
			if err != nil {
				b.Fatal(err)
			}
			c, err := Connect(ctx, conn, Auth{Signer: ts.ClientSigner, HostKey: ts.HostKey})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.SetBytes(bulkSize)
			for b.Loop() {
				nc, err := c.Dial(ctx, "tcp", sink.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				if _, err := nc.Write(data); err != nil {
					b.Fatal(err)
				}
				_ = nc.(interface{ CloseWrite() error }).CloseWrite()
				_, _ = io.Copy(io.Discard, nc) // until the sink closes
				_ = nc.Close()
			}
		})
	}
}

// pairedTimer accumulates the time of two contenders run alternately in one
// benchmark loop, so that load from other work on a shared machine hits
// both alike; the ratio is the number to read.
type pairedTimer struct{ ours, peer time.Duration }

func (pt *pairedTimer) report(b *testing.B, unit string, bytesPerOp int64) {
	n := float64(b.N)
	b.ReportMetric(float64(pt.ours.Microseconds())/n/1000, "hostgate-ms/op")
	b.ReportMetric(float64(pt.peer.Microseconds())/n/1000, "openssh-ms/op")
	b.ReportMetric(float64(pt.peer)/float64(pt.ours), unit)
	if bytesPerOp > 0 {
		b.ReportMetric(float64(bytesPerOp)*n/pt.ours.Seconds()/1e6, "hostgate-MB/s")
		b.ReportMetric(float64(bytesPerOp)*n/pt.peer.Seconds()/1e6, "openssh-MB/s")
	}
}

// timed runs f and adds its duration to d.
func timed(d *time.Duration, f func()) {
	start := time.Now()
	f()
	*d += time.Since(start)
}

// BenchmarkPairedExecRoundTrip: `true` on an open connection, ours and
// OpenSSH's (ssh through a ControlMaster) alternately.
func BenchmarkPairedExecRoundTrip(b *testing.B) {
	s := startSSHD(b, sshdOptions{LogLevel: "ERROR"})
	ctx := benchCtx(b)
	c := s.connect(b, nil)
	o := newOpenSSH(b, s)
	ctl := filepath.Join(b.TempDir(), "ctl")
	if out, err := o.command([]string{"-o", "ControlMaster=yes", "-o", "ControlPath=" + ctl, "-o", "ControlPersist=yes", "-f", "-N"}).CombinedOutput(); err != nil {
		b.Fatalf("ssh master: %v %s", err, out)
	}
	client := []string{"-o", "ControlMaster=no", "-o", "ControlPath=" + ctl}
	b.Cleanup(func() { _ = o.command(append(client, "-O", "exit")).Run() })
	ours := func() {
		p, err := c.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{})
		if err != nil {
			b.Fatal(err)
		}
		_ = p.Stdin().Close()
		go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
		_, _ = io.Copy(io.Discard, p.Stdout())
		if err := p.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	peer := func() {
		if out, err := o.command(client, "true").CombinedOutput(); err != nil {
			b.Fatalf("ssh true: %v %s", err, out)
		}
	}
	var pt pairedTimer
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			timed(&pt.ours, ours)
			timed(&pt.peer, peer)
		} else {
			timed(&pt.peer, peer)
			timed(&pt.ours, ours)
		}
		i++
	}
	pt.report(b, "openssh/hostgate-time", 0)
}

// BenchmarkPairedBulk: 64 MiB into `cat >/dev/null` over a new connection
// per transfer, aes128-gcm@openssh.com on both, ours and OpenSSH's
// alternately.
func BenchmarkPairedBulk(b *testing.B) {
	s := startSSHD(b, sshdOptions{LogLevel: "ERROR"})
	ctx := benchCtx(b)
	o := newOpenSSH(b, s)
	data := make([]byte, bulkSize)
	for i := range data {
		data[i] = byte(i * 7)
	}
	ours := func() {
		c, err := Connect(ctx, s.dial(b), s.auth())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		p, err := c.Spawn(ctx, []string{"sh", "-c", "cat >/dev/null"}, hostgate.SpawnOptions{})
		if err != nil {
			b.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
		go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
		if _, err := p.Stdin().Write(data); err != nil {
			b.Fatal(err)
		}
		_ = p.Stdin().Close()
		if err := p.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	peer := func() {
		cmd := o.command([]string{"-c", ssh.CipherAES128GCM}, "cat >/dev/null")
		cmd.Stdin = bytes.NewReader(data)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("ssh: %v %s", err, out)
		}
	}
	var pt pairedTimer
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			timed(&pt.ours, ours)
			timed(&pt.peer, peer)
		} else {
			timed(&pt.peer, peer)
			timed(&pt.ours, ours)
		}
		i++
	}
	pt.report(b, "openssh/hostgate-time", bulkSize)
}
