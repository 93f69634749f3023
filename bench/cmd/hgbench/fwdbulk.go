package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/bench"
)

// forwardBulk moves one big stream through one forwarded connection, the
// other half of what a forward is for (a dev server's bundle, a database
// dump), where forward times many small ones. Two hostgate sides against
// ssh -L to sshd: Host.Forward through the gateway, and OpenSSH's own ssh
// -L to the agent through `gateway proxy` as its ProxyCommand, the path the
// README gives OpenSSH users, where ssh's buffers and the proxy process are
// on the path too.
func (e *env) forwardBulk(ctx context.Context) ([]*bench.Scenario, error) {
	n := int64(e.cfg.bulkMiB/2) * mib
	sink, err := startSink()
	if err != nil {
		return nil, err
	}
	defer sink.Close()
	target := sink.ln.Addr().String()

	fw, directFw, err := e.forwardsTo(ctx, target)
	if err != nil {
		return nil, err
	}
	defer fw.Close()
	defer directFw.Close()
	proxied, err := e.sshThroughProxy(ctx, target, e.cfg.gatewayBin, "proxied", true, false)
	if err != nil {
		return nil, fmt.Errorf("ssh -L through gateway proxy: %w", err)
	}
	defer proxied.Stop()
	// The same ssh, its proxy joining it to the agent's direct listener.
	proxiedDirect, err := e.sshThroughProxy(ctx, target, e.cfg.gatewayBin, "proxied-direct", false, false)
	if err != nil {
		return nil, fmt.Errorf("ssh -L through gateway proxy, direct: %w", err)
	}
	defer proxiedDirect.Stop()
	// And with ProxyUseFdpass: the proxy hands ssh the agent's socket and
	// exits.
	proxiedFdpass, err := e.sshThroughProxy(ctx, target, e.cfg.gatewayBin, "proxied-fdpass", false, true)
	if err != nil {
		return nil, fmt.Errorf("ssh -L through gateway proxy --fdpass, direct: %w", err)
	}
	defer proxiedFdpass.Stop()
	// With -gateway-before, a second ssh whose ProxyCommand is the build
	// before's proxy, through this gateway to the same host: the A/B rows
	// differ in the proxy alone, the process this path adds to OpenSSH's.
	var proxiedBefore *proxiedSSH
	if e.cfg.gatewayBefore != "" {
		if proxiedBefore, err = e.sshThroughProxy(ctx, target, e.cfg.gatewayBefore, "proxied-before", true, false); err != nil {
			return nil, fmt.Errorf("ssh -L through the build before's gateway proxy: %w", err)
		}
		defer proxiedBefore.Stop()
	}
	peerAddr, err := e.sshd.forwardL(ctx, target)
	if err != nil {
		return nil, err
	}

	const peer = "ssh -L (ControlMaster) → sshd"
	name := fmt.Sprintf("local forward, %d MiB through one connection", n/mib)
	goRow := &bench.Scenario{Name: name, Unit: "MiB/s", PeerName: peer, Better: bench.Higher,
		Note: "Host.Forward through the gateway; the bytes go to a TCP sink on the host's side, and a side ends when the sink has read them all"}
	goDirectRow := &bench.Scenario{Name: name + ", direct session", Unit: "MiB/s", PeerName: peer, Better: bench.Higher,
		Note: "Host.Forward over a direct session: the Go client over loopback TCP straight to the agent's --direct listener, the gateway off the path (the forward rows' direct session)"}
	sshRow := &bench.Scenario{Name: name + ", OpenSSH ssh -L through gateway proxy", Unit: "MiB/s", PeerName: peer, Better: bench.Higher,
		Note: "OpenSSH's ssh -L to the agent with `gateway proxy` as its ProxyCommand (the README's OpenSSH path): ssh, the proxy, the gateway and the agent"}
	directRow := &bench.Scenario{Name: name + ", OpenSSH ssh -L through gateway proxy, direct session", Unit: "MiB/s", PeerName: peer, Better: bench.Higher,
		Note: "the same ssh, its proxy given the agent's direct listener by the gateway (agent connect --direct; the proxy's default): ssh, the proxy and the agent, the gateway off the path"}
	fdpassRow := &bench.Scenario{Name: name + ", OpenSSH ssh -L through gateway proxy --fdpass, direct session", Unit: "MiB/s", PeerName: peer, Better: bench.Higher,
		Note: "the same with ssh's ProxyUseFdpass and `gateway proxy --fdpass`, which hands ssh the agent's socket and exits: ssh and the agent alone"}
	goCPU := newCPURow(goRow, "MiB")
	goCPU.peerShares = true
	goDirectCPU := newCPURow(goDirectRow, "MiB")
	goDirectCPU.peerShares = true
	// The machine's CPU time: ssh and the proxy use what the gateway and
	// the agent (the row's note) do not.
	sshCPU := newCPURow(sshRow, "MiB")
	directCPU := newCPURow(directRow, "MiB")
	fdpassCPU := newCPURow(fdpassRow, "MiB")
	var abRow, abCPU *bench.Scenario
	if proxiedBefore != nil {
		abRow = e.abScenario(sshRow.Name, "MiB/s", bench.Higher)
		abCPU = e.abScenario(sshRow.Name+", the proxy process's CPU time per MiB", "ms", bench.Lower)
		abCPU.Note = "the `gateway proxy` process's own CPU time (user and system) per MiB, this build's against the build before's, each ssh's ProxyCommand through this gateway"
	}
	for i := range e.cfg.pairs {
		var a, g, b, d, f, p, bb float64
		var ua, ug, ub, ud, uf, up cpuUse
		var pb, pbb time.Duration
		rate := func(addr string, r *float64) func() error {
			return func() error {
				d, err := sendThrough(ctx, addr, n, sink)
				if err != nil {
					return err
				}
				*r = float64(n) / mib / d.Seconds()
				return nil
			}
		}
		sides := []func() error{
			e.metered(&ua, true, rate(fw.Addr().String(), &a)),
			e.metered(&ug, true, rate(directFw.Addr().String(), &g)),
			e.metered(&ub, true, proxied.meterProxy(&pb, rate(proxied.addr, &b))),
			e.metered(&ud, true, rate(proxiedDirect.addr, &d)),
			e.metered(&uf, true, rate(proxiedFdpass.addr, &f)),
			e.metered(&up, false, rate(peerAddr, &p)),
		}
		if proxiedBefore != nil {
			sides = append(sides, proxiedBefore.meterProxy(&pbb, rate(proxiedBefore.addr, &bb)))
		}
		if err := bench.Alternate(i, sides...); err != nil {
			return nil, err
		}
		goRow.Add(a, p)
		goDirectRow.Add(g, p)
		sshRow.Add(b, p)
		directRow.Add(d, p)
		fdpassRow.Add(f, p)
		goCPU.add(ua, up, float64(n)/mib)
		goDirectCPU.add(ug, up, float64(n)/mib)
		sshCPU.add(ub, up, float64(n)/mib)
		directCPU.add(ud, up, float64(n)/mib)
		fdpassCPU.add(uf, up, float64(n)/mib)
		if proxiedBefore != nil {
			abRow.Add(b, bb)
			perMiB := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / (float64(n) / mib) }
			abCPU.Add(perMiB(pb), perMiB(pbb))
		}
	}
	out := []*bench.Scenario{goRow, goCPU.scenario(), goDirectRow, goDirectCPU.scenario(), sshRow, sshCPU.scenario(), directRow, directCPU.scenario(), fdpassRow, fdpassCPU.scenario()}
	if proxiedBefore != nil {
		out = append(out, abRow, abCPU)
	}
	return out, nil
}

// sink is a TCP server that reads each connection to its end, then
// reports how much it read and closes it.
type sink struct {
	ln     net.Listener
	wg     sync.WaitGroup
	done   chan int64
	closed chan struct{}
}

func startSink() (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{ln: ln, done: make(chan int64, 16), closed: make(chan struct{})}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() {
				n, _ := readAll(c)
				_ = c.Close()
				select {
				case s.done <- n:
				case <-s.closed: // nobody waits for it
				}
			})
		}
	})
	return s, nil
}

func (s *sink) Close() {
	_ = s.ln.Close()
	close(s.closed)
	s.wg.Wait()
}

// sendThrough writes n bytes through the forward listening at addr and
// returns when the sink has read them all and the forward has carried its
// close back.
func sendThrough(ctx context.Context, addr string, n int64, s *sink) (time.Duration, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	if err := writeN(c, n); err != nil {
		return 0, err
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return 0, err
	}
	if _, err := io.Copy(io.Discard, c); err != nil {
		return 0, err
	}
	took := time.Since(start)
	wait := time.After(30 * time.Second)
	for {
		select {
		case got := <-s.done:
			if got == 0 { // a readiness probe's connection
				continue
			}
			if got != n {
				return 0, fmt.Errorf("the sink read %d bytes of %d", got, n)
			}
			return took, nil
		case <-wait:
			return 0, errors.New("the sink did not finish in 30 s")
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// proxyDirectRE is gateway proxy --verbose's line for a direct session.
var proxyDirectRE = regexp.MustCompile(`direct session to \S+`)

// proxiedSSH is OpenSSH's ssh holding a local forward to the bench host
// through `gateway proxy`, in a process group of its own with its proxy.
type proxiedSSH struct {
	*proc
	addr     string
	proxyPid int // the ProxyCommand's process, ssh's child
}

// meterProxy runs side and stores the CPU time the proxy process used
// meanwhile in *d.
func (p *proxiedSSH) meterProxy(d *time.Duration, side func() error) func() error {
	return func() error {
		before, err := bench.ProcessStat(p.proxyPid)
		if err != nil {
			return fmt.Errorf("gateway proxy's CPU time: %w", err)
		}
		if err := side(); err != nil {
			return err
		}
		after, err := bench.ProcessStat(p.proxyPid)
		if err != nil || after.Start != before.Start {
			return fmt.Errorf("gateway proxy's CPU time: the process (pid %d) ended during the transfer: %v", p.proxyPid, err)
		}
		*d = after.CPU - before.CPU
		return nil
	}
}

// Stop ends ssh and then its group: the proxy too, were it left behind.
func (p *proxiedSSH) Stop() {
	p.proc.Stop()
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
}

// sshThroughProxy starts `ssh -N -L` to the bench host with the gateway's
// certificate for it (`gateway cert`) and `proxyBin proxy` as ProxyCommand,
// its files in e.dir's subdirectory sub, and waits until its forward
// answers: through the gateway's relay, or where relayOnly is false,
// straight to the agent's direct listener, which the proxy must then take.
// With fdpass, ssh takes its socket from `gateway proxy --fdpass`
// (ProxyUseFdpass), which then exits: no proxy process stays.
func (e *env) sshThroughProxy(ctx context.Context, target, proxyBin, sub string, relayOnly, fdpass bool) (*proxiedSSH, error) {
	pc, err := e.proxyClient(ctx, sub)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := pc.command(ctx, proxyBin, e.gw, relayOnly, fdpass, []string{"-N", "-L", addr + ":" + target})
	pr, err := startProc("ssh -L through gateway proxy", cmd)
	if err != nil {
		return nil, err
	}
	p := &proxiedSSH{proc: pr, addr: addr}
	deadline := time.Now().Add(20 * time.Second)
	for {
		// A connection the forward accepts, closed at once, is an empty
		// stream the sink reads and reports: sendThrough skips it.
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			// ssh runs its ProxyCommand with exec in a shell, so the
			// one process below it is the proxy.
			below, err := bench.Descendants(p.Pid())
			switch {
			case fdpass && err == nil && len(below) == 0:
				// The proxy handed ssh its socket and exited.
			case fdpass:
				p.Stop()
				return nil, fmt.Errorf("ssh's ProxyCommand with --fdpass: the processes below ssh (pid %d) are %v, want none: %v", p.Pid(), below, err)
			case err != nil || len(below) != 1:
				p.Stop()
				return nil, fmt.Errorf("ssh's ProxyCommand: the processes below ssh (pid %d) are %v, want the proxy alone: %v", p.Pid(), below, err)
			default:
				p.proxyPid = below[0]
			}
			// --verbose (by the environment) says which path it took.
			if !relayOnly {
				if _, err := p.waitLine(proxyDirectRE, 5*time.Second); err != nil {
					p.Stop()
					return nil, fmt.Errorf("gateway proxy did not join ssh to the agent's direct listener: %w; it said: %s", err, p.output())
				}
			}
			return p, nil
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("its forward did not listen in 20 s; ssh said: %s", p.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// proxyClient is what OpenSSH's ssh needs to reach the bench host through
// `gateway proxy`: a key with the gateway's certificate for the host and
// the host's pinned key (`gateway cert`), in its own directory.
type proxyClient struct {
	dir, key, knownHosts string
}

// proxyClient makes a proxyClient in e.dir's subdirectory sub.
func (e *env) proxyClient(ctx context.Context, sub string) (*proxyClient, error) {
	dir := filepath.Join(e.dir, sub)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	pc := &proxyClient{dir: dir, key: filepath.Join(dir, "key"), knownHosts: filepath.Join(dir, "known_hosts")}
	cert := exec.CommandContext(ctx, e.cfg.gatewayBin, "cert", "--url", e.gw.url, "--token", e.gw.admin, "--key", pc.key, "--known-hosts", pc.knownHosts, benchHostID)
	if out, err := cert.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("gateway cert: %w: %s", err, out)
	}
	return pc, nil
}

// command is ssh to the bench host with `proxyBin proxy` to gw as its
// ProxyCommand, with opts before the host and remote after it. With
// relayOnly the proxy takes the relay, else the agent's direct listener
// where it answers; with fdpass, ssh takes its socket from the proxy
// (ProxyUseFdpass), which then exits. --verbose, by the environment, says
// on ssh's stderr which path the proxy took.
func (pc *proxyClient) command(ctx context.Context, proxyBin string, gw *gateway, relayOnly, fdpass bool, opts []string, remote ...string) *exec.Cmd {
	args := []string{"-F", "/dev/null", "-i", pc.key, "-o", "CertificateFile=" + pc.key + "-" + benchHostID + "-cert.pub",
		"-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + pc.knownHosts,
		"-o", "LogLevel=ERROR", "-o", "Ciphers=" + Cipher, "-o", "Compression=no",
		"-o", "ProxyCommand=" + proxyBin + " proxy --url " + gw.url + " %h",
		"-o", "ProxyUseFdpass=" + map[bool]string{true: "yes", false: "no"}[fdpass]}
	args = append(append(append(args, opts...), benchHostID), remote...)
	cmd := exec.CommandContext(ctx, "ssh", args...)
	// The relay, as every row but e.direct's measures it: the bench host's
	// agent listens for direct sessions, which gateway proxy would join ssh
	// to. By the environment, which a build before --relay-only ignores
	// (it relays anyway), where the flag would fail it.
	cmd.Env = append(os.Environ(), "HOSTGATE_TOKEN="+gw.admin, "HOSTGATE_RELAY_ONLY="+strconv.FormatBool(relayOnly), "HOSTGATE_VERBOSE=1", "XDG_CACHE_HOME="+pc.dir)
	if fdpass {
		cmd.Env = append(cmd.Env, "HOSTGATE_FDPASS=1")
	}
	return cmd
}
