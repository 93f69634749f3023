package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hostgate/hostgate/bench"
)

// sshclientAB is the sshclient group's A/B rows: OpenSSH's sftp and ssh
// -L, the clients of an agent's own SSH server (`agent serve --listen`,
// the agent's direct listener), against this agent and the -agent-before
// one, alternating, with each agent process's CPU time per MiB. The other
// A/B rows go through the gateway, where the agent's SSH server reads a
// yamux stream, not a TCP socket.
func (e *env) sshclientAB(ctx context.Context, a *aloneAgent) ([]*bench.Scenario, error) {
	b, err := e.agentServeBin(ctx, e.cfg.agentBefore)
	if err != nil {
		return nil, fmt.Errorf("agent serve before: %w", err)
	}
	defer b.stop()
	n := int64(e.cfg.sftpMiB) * mib
	src, dst, err := e.sshclientFiles(n)
	if err != nil {
		return nil, err
	}
	put := func() error {
		if st, err := os.Stat(dst); err != nil || st.Size() != n {
			return fmt.Errorf("upload: %v bytes arrived (%v), want %d", sizeOf(st), err, n)
		}
		return errors.Join(settle(dst), os.Remove(dst))
	}
	sftp := func(batch string) func(ag *aloneAgent) error {
		return func(ag *aloneAgent) error { return e.sshd.sftpTo(ctx, portOf(ag), DefaultCipher, batch) }
	}
	var out []*bench.Scenario
	for _, r := range []struct {
		name  string
		run   func(*aloneAgent) error
		after func() error
	}{
		{fmt.Sprintf("SFTP download %d MiB, OpenSSH sftp to the agent, its default cipher", n/mib), sftp("get " + src + " /dev/null\n"), nil},
		{fmt.Sprintf("SFTP upload %d MiB, OpenSSH sftp to the agent, its default cipher", n/mib), sftp("put " + src + " " + dst + "\n"), put},
	} {
		rate, cpu, err := e.pairAgents(a, b, n, r.name, r.run, r.after)
		if err != nil {
			return out, err
		}
		out = append(out, rate, cpu)
	}

	// ssh -L into each agent, a master per agent, as the fwdbulk rows
	// send: the upload half of a forward, where the agent's read loop
	// meets OpenSSH's 32 KiB packets one by one.
	sk, err := startSink()
	if err != nil {
		return out, err
	}
	defer sk.Close()
	fwd := map[*aloneAgent]string{}
	for i, ag := range []*aloneAgent{a, b} {
		ctl := filepath.Join(e.dir, "ctl-ab-"+strconv.Itoa(i))
		m, err := e.sshd.masterTo(ctx, portOf(ag), Cipher, ctl)
		if err != nil {
			return out, err
		}
		defer stopMaster(m)
		port, err := freePort()
		if err != nil {
			return out, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		if o, err := e.sshd.viaMaster(ctx, ctl, portOf(ag), Cipher, []string{"-O", "forward", "-L", addr + ":" + sk.ln.Addr().String()}).CombinedOutput(); err != nil {
			return out, fmt.Errorf("ssh -O forward: %w: %s", err, o)
		}
		fwd[ag] = addr
	}
	fn := int64(e.cfg.bulkMiB/2) * mib
	rate, cpu, err := e.pairAgents(a, b, fn, fmt.Sprintf("local forward, %d MiB through one connection, OpenSSH ssh -L to the agent", fn/mib), func(ag *aloneAgent) error {
		_, err := sendThrough(ctx, fwd[ag], fn, sk)
		return err
	}, nil)
	if err != nil {
		return out, err
	}
	return append(out, rate, cpu), nil
}

// pairAgents runs run against agents a (this build) and b (before),
// alternating, for the pairs of the sshclient group: the rate of moving
// n bytes and each agent process's CPU time per MiB.
func (e *env) pairAgents(a, b *aloneAgent, n int64, name string, run func(*aloneAgent) error, after func() error) (rate, cpu *bench.Scenario, err error) {
	rate = e.abScenario(name, "MiB/s", bench.Higher)
	cpu = e.abScenario(name+", the agent process's CPU time per MiB", "ms", bench.Lower)
	if after == nil {
		after = func() error { return nil }
	}
	side := func(ag *aloneAgent, d, used *time.Duration) func() error {
		return func() error {
			before, err := bench.ProcessStat(ag.pid)
			if err != nil {
				return err
			}
			if *d, err = timeIt(func() error { return run(ag) }); err != nil {
				return err
			}
			now, err := bench.ProcessStat(ag.pid)
			if err != nil {
				return err
			}
			*used = now.CPU - before.CPU
			return after()
		}
	}
	mibs := float64(n) / mib
	for i := range sshclientPairs(e.cfg.pairs) {
		var da, db, ua, ub time.Duration
		if err := bench.Alternate(i, side(a, &da, &ua), side(b, &db, &ub)); err != nil {
			return nil, nil, err
		}
		rate.Add(mibs/da.Seconds(), mibs/db.Seconds())
		cpu.Add(float64(ua)/float64(time.Millisecond)/mibs, float64(ub)/float64(time.Millisecond)/mibs)
	}
	return rate, cpu, nil
}

// portOf is the port an aloneAgent listens on.
func portOf(a *aloneAgent) string {
	_, port, _ := net.SplitHostPort(a.addr)
	return port
}
