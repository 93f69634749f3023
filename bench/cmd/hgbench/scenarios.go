package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bench"
	"github.com/hostgate/hostgate/sshlayer"
)

const mib = 1 << 20

// chunk is what the writers send: incompressible enough, never allocated
// per write.
var chunk = func() []byte {
	b := make([]byte, mib)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}()

func writeN(w io.Writer, n int64) error {
	for n > 0 {
		k := min(n, int64(len(chunk)))
		if _, err := w.Write(chunk[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// readAll reads r to EOF in reads as large as writeN's writes and counts
// the bytes. (io.Copy to io.Discard would read 8 KiB at a time: a syscall
// per 8 KiB on OpenSSH's side, whose bytes come through a pipe.)
func readAll(r io.Reader) (int64, error) {
	buf := make([]byte, len(chunk))
	var n int64
	for {
		k, err := r.Read(buf)
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// bulk streams bytes to `cat >/dev/null`, and then back out of `head -c`:
// hostgate's whole path (client → WebSocket → gateway → yamux → agent)
// against ssh through a ControlMaster straight to sshd, both measured from
// spawn to exit.
func (e *env) bulk(ctx context.Context) ([]*bench.Scenario, error) {
	to := &bench.Scenario{Name: fmt.Sprintf("bulk stream %d MiB to cat >/dev/null", e.cfg.bulkMiB), Unit: "MiB/s",
		PeerName: "OpenSSH ssh → sshd, " + Cipher, Better: bench.Higher}
	from := &bench.Scenario{Name: fmt.Sprintf("bulk stream %d MiB from head -c (host to client)", e.cfg.bulkMiB), Unit: "MiB/s",
		PeerName: "OpenSSH ssh → sshd, " + Cipher, Better: bench.Higher,
		Note: "sh -c 'head -c N /dev/zero' on the host, its stdout read by the client in 1 MiB reads on both sides (OpenSSH's through ssh's stdout pipe)"}
	toCPU, fromCPU := newCPURow(to, "MiB"), newCPURow(from, "MiB")
	if err := e.bothWays(ctx, e.host, "hostgate", to, from, toCPU, fromCPU); err != nil {
		return nil, err
	}
	return []*bench.Scenario{to, toCPU.scenario(), from, fromCPU.scenario()}, nil
}

// bothWays fills to and from with pairs of the bulk stream to and from h
// (named who in errors) against the same through OpenSSH, alternating;
// toCPU and fromCPU, when not nil, with the CPU time of hostgate's whole
// path (h must be the bench host through the gateway).
func (e *env) bothWays(ctx context.Context, h spawner, who string, to, from *bench.Scenario, toCPU, fromCPU *cpuRow) error {
	n := int64(e.cfg.bulkMiB) * mib
	rate := func(d time.Duration) float64 { return float64(n) / mib / d.Seconds() }
	for _, dir := range []struct {
		s    *bench.Scenario
		cpu  *cpuRow
		ours func(context.Context, spawner, int64) (time.Duration, error)
		peer func(context.Context, int64) (time.Duration, error)
	}{{to, toCPU, streamTo, e.sshStream}, {from, fromCPU, streamFrom, e.sshStreamFrom}} {
		for i := range e.cfg.pairs {
			var (
				a, b   time.Duration
				ua, ub cpuUse
			)
			ours := func() (err error) {
				if a, err = dir.ours(ctx, h, n); err != nil {
					return fmt.Errorf("%s: %w", who, err)
				}
				return nil
			}
			peer := func() (err error) {
				b, err = dir.peer(ctx, n)
				return err
			}
			if dir.cpu != nil {
				ours, peer = e.metered(&ua, true, ours), e.metered(&ub, false, peer)
			}
			if err := bench.Alternate(i, ours, peer); err != nil {
				return err
			}
			dir.s.Add(rate(a), rate(b))
			if dir.cpu != nil {
				dir.cpu.add(ua, ub, float64(n)/mib)
			}
		}
	}
	return nil
}

// sshStreamFrom times n bytes out of `head -c N /dev/zero` through
// OpenSSH's ssh.
func (e *env) sshStreamFrom(ctx context.Context, n int64) (time.Duration, error) {
	d, err := timeIt(func() error { return sshOut(e.sshd.Command(ctx, nil, fmt.Sprintf("head -c %d /dev/zero", n)), n) })
	if err != nil {
		return 0, fmt.Errorf("ssh: %w", err)
	}
	return d, nil
}

// streamFrom times n bytes out of `head -c N /dev/zero` on h, from spawn
// to exit.
func streamFrom(ctx context.Context, h spawner, n int64) (time.Duration, error) {
	return timeIt(func() error {
		// Through sh -c, as streamTo and as OpenSSH runs it.
		p, err := h.Spawn(ctx, []string{"sh", "-c", fmt.Sprintf("head -c %d /dev/zero", n)}, hostgate.SpawnOptions{})
		if err != nil {
			return err
		}
		_ = p.Stdin().Close()
		go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
		got, rerr := readAll(p.Stdout())
		if rerr == nil && got != n {
			rerr = fmt.Errorf("read %d bytes, want %d", got, n)
		}
		return errors.Join(rerr, p.Wait())
	})
}

// sshStream times n bytes into `cat >/dev/null` through OpenSSH's ssh.
func (e *env) sshStream(ctx context.Context, n int64) (time.Duration, error) {
	d, err := timeIt(func() error { return sshIn(e.sshd.Command(ctx, nil, "cat >/dev/null"), n) })
	if err != nil {
		return 0, fmt.Errorf("ssh: %w", err)
	}
	return d, nil
}

// spawner is what a bulk stream runs on: a host, or an SSH client alone.
type spawner interface {
	Spawn(ctx context.Context, argv []string, opts hostgate.SpawnOptions) (hostgate.Process, error)
}

// streamTo times n bytes into `cat >/dev/null` on h, from spawn to exit.
func streamTo(ctx context.Context, h spawner, n int64) (time.Duration, error) {
	return timeIt(func() error {
		p, err := h.Spawn(ctx, []string{"sh", "-c", "cat >/dev/null"}, hostgate.SpawnOptions{})
		if err != nil {
			return err
		}
		go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
		go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
		werr := writeN(p.Stdin(), n)
		_ = p.Stdin().Close()
		return errors.Join(werr, p.Wait())
	})
}

// sftp downloads and uploads one file through hostgate's SFTP provider and
// through OpenSSH's sftp (batch mode, through the ControlMaster).
func (e *env) sftp(ctx context.Context) ([]*bench.Scenario, error) {
	n := int64(e.cfg.sftpMiB) * mib
	files, err := e.userDir("files")
	if err != nil {
		return nil, err
	}
	src := filepath.Join(files, "src.bin")
	if err := writeFileN(src, n); err != nil {
		return nil, err
	}
	fsys, err := e.host.FS(ctx)
	if err != nil {
		return nil, err
	}
	down := &bench.Scenario{Name: fmt.Sprintf("SFTP download %d MiB", e.cfg.sftpMiB), Unit: "MiB/s", PeerName: "OpenSSH sftp → sshd", Better: bench.Higher}
	toFile := &bench.Scenario{Name: fmt.Sprintf("SFTP download %d MiB to a file", e.cfg.sftpMiB), Unit: "MiB/s", PeerName: "OpenSSH sftp → sshd", Better: bench.Higher,
		Note: "the client writes a local file; its write-back is neither timed nor metered, as in the upload rows"}
	up := &bench.Scenario{Name: fmt.Sprintf("SFTP upload %d MiB", e.cfg.sftpMiB), Unit: "MiB/s", PeerName: "OpenSSH sftp → sshd", Better: bench.Higher}
	rate := func(d time.Duration) float64 { return float64(n) / mib / d.Seconds() }
	downCPU, toFileCPU, upCPU := newCPURow(down, "MiB"), newCPURow(toFile, "MiB"), newCPURow(up, "MiB")
	work := float64(n) / mib
	dst := filepath.Join(files, "dst.bin")
	local := filepath.Join(e.dir, "download.bin") // the client's side, not the host's files
	for i := range e.cfg.pairs {
		var (
			a, b   time.Duration
			ua, ub cpuUse
		)
		err := bench.Alternate(i, e.metered(&ua, true, func() (err error) {
			if a, err = sftpRead(ctx, e.host, src, n); err != nil {
				return fmt.Errorf("hostgate download: %w", err)
			}
			return nil
		}), e.metered(&ub, false, func() (err error) {
			b, err = timeIt(func() error { return e.sshd.SFTP(ctx, "get "+src+" /dev/null\n") })
			return err
		}))
		if err != nil {
			return nil, err
		}
		down.Add(rate(a), rate(b))
		downCPU.add(ua, ub, work)

		// To a file: what a user's `get` does, the client's writes to its
		// disk on the path (pkg/sftp change 19's client side).
		err = bench.Alternate(i, func() (err error) {
			err = e.metered(&ua, true, func() (err error) {
				a, err = timeIt(func() error { return sftpGet(ctx, fsys, src, local) })
				return err
			})()
			if err != nil {
				return fmt.Errorf("hostgate download to a file: %w", err)
			}
			return landed(local, n)
		}, func() (err error) {
			err = e.metered(&ub, false, func() (err error) {
				b, err = timeIt(func() error { return e.sshd.SFTP(ctx, "get "+src+" "+local+"\n") })
				return err
			})()
			if err != nil {
				return err
			}
			return landed(local, n)
		})
		if err != nil {
			return nil, err
		}
		toFile.Add(rate(a), rate(b))
		toFileCPU.add(ua, ub, work)

		// Each side uploads to a fresh dst (untimed removal), so the size
		// check below sees this upload's bytes, not the other side's.
		fresh := func() error {
			if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return nil
		}
		upload := func() error {
			in, err := os.Open(src)
			if err != nil {
				return err
			}
			defer in.Close()
			w, err := fsys.Create(ctx, dst, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(w, in)
			return errors.Join(err, w.Close())
		}
		// The removal, and the write-back of what each upload left in the
		// page cache (settle), are neither timed nor metered: a 256 MiB
		// upload's dirty pages went to disk in the kernel's flusher
		// threads 5 to 30 s later, during whichever side's download or
		// upload came then, which took the CPU (and the row) from that
		// side alone.
		err = bench.Alternate(i, func() (err error) {
			if err := fresh(); err != nil {
				return err
			}
			err = e.metered(&ua, true, func() (err error) { a, err = timeIt(upload); return err })()
			if err != nil {
				return fmt.Errorf("hostgate upload: %w", err)
			}
			if st, err := os.Stat(dst); err != nil || st.Size() != n {
				return fmt.Errorf("hostgate upload: %v bytes arrived (%v), want %d", sizeOf(st), err, n)
			}
			return settle(dst)
		}, func() (err error) {
			if err := fresh(); err != nil {
				return err
			}
			err = e.metered(&ub, false, func() (err error) {
				b, err = timeIt(func() error { return e.sshd.SFTP(ctx, "put "+src+" "+dst+"\n") })
				return err
			})()
			if err != nil {
				return err
			}
			return settle(dst)
		})
		if err != nil {
			return nil, err
		}
		up.Add(rate(a), rate(b))
		upCPU.add(ua, ub, work)
	}
	out := []*bench.Scenario{down, downCPU.scenario(), toFile, toFileCPU.scenario(), up, upCPU.scenario()}
	if e.before != nil {
		ab, err := e.sftpDownloadAB(ctx, src, n)
		if err != nil {
			return out, err
		}
		out = append(out, ab)
	}
	return out, nil
}

// sftpRead reads path from h's SFTP filesystem to the end.
func sftpRead(ctx context.Context, h *hostgate.Host, path string, n int64) (time.Duration, error) {
	fsys, err := h.FS(ctx)
	if err != nil {
		return 0, err
	}
	return timeIt(func() error {
		r, err := fsys.Open(ctx, path)
		if err != nil {
			return err
		}
		got, err := io.Copy(io.Discard, r)
		if cerr := r.Close(); err == nil {
			err = cerr
		}
		if err == nil && got != n {
			err = fmt.Errorf("read %d bytes, want %d", got, n)
		}
		return err
	})
}

// sftpGet copies path from fsys to a new local file, as a user's `get` does.
func sftpGet(ctx context.Context, fsys hostgate.Provider, path, local string) error {
	r, err := fsys.Open(ctx, path)
	if err != nil {
		return err
	}
	out, err := os.Create(local)
	if err != nil {
		return errors.Join(err, r.Close())
	}
	_, err = io.Copy(out, r)
	return errors.Join(err, out.Close(), r.Close())
}

// landed checks that a download left n bytes at local, then writes them to
// disk (untimed) and removes the file, so that no side's write-back lands
// in the other side's turn.
func landed(local string, n int64) error {
	st, err := os.Stat(local)
	if err != nil || st.Size() != n {
		return fmt.Errorf("%v bytes arrived at %s (%v), want %d", sizeOf(st), local, err, n)
	}
	return errors.Join(settle(local), os.Remove(local))
}

// userDir makes the directory name in e.dir, owned by the bench user,
// for files both sides' servers read and write as that user.
func (e *env) userDir(name string) (string, error) {
	dir := filepath.Join(e.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, os.Chown(dir, e.uid, e.gid)
}

// writeFileN writes a file of n bytes at path and settles it, so that
// its write-back does not come during the first pairs.
func writeFileN(path string, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := errors.Join(writeN(f, n), f.Close()); err != nil {
		return err
	}
	return settle(path)
}

// settle writes path's dirty pages to disk and waits for them.
func settle(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return -1
	}
	return st.Size()
}

// exec measures `true` round trips on an open connection: Host.Exec through
// the gateway against `ssh true` through a ControlMaster.
func (e *env) exec(ctx context.Context) ([]*bench.Scenario, error) {
	p50 := &bench.Scenario{Name: "exec round trip of true, p50", Unit: "ms", PeerName: "OpenSSH ControlMaster", Better: bench.Lower,
		Note: fmt.Sprintf("%d round trips per side per pair; the command runs as a user whose login shell is /bin/sh on both sides", e.cfg.execN)}
	p99 := &bench.Scenario{Name: "exec round trip of true, p99", Unit: "ms", PeerName: "OpenSSH ControlMaster", Better: bench.Lower}
	hostExec := func(h *hostgate.Host) func() error {
		return func() error {
			_, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
			return err
		}
	}
	for i := range e.cfg.pairs {
		var a, b []float64
		err := bench.Alternate(i, func() (err error) {
			if a, err = samples(e.cfg.execN, hostExec(e.host)); err != nil {
				return fmt.Errorf("hostgate: %w", err)
			}
			return nil
		}, func() (err error) {
			b, err = samples(e.cfg.execN, func() error {
				if out, err := e.sshd.Command(ctx, nil, "true").CombinedOutput(); err != nil {
					return fmt.Errorf("%w: %s", err, out)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("ssh: %w", err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		p50.Add(bench.Percentile(a, 50), bench.Percentile(b, 50))
		p99.Add(bench.Percentile(a, 99), bench.Percentile(b, 99))
	}
	out := []*bench.Scenario{p50, p99}
	if e.before != nil {
		ab := e.abScenario("exec round trip of true, p50", "ms", bench.Lower)
		for i := range e.cfg.pairs {
			var a, b []float64
			err := bench.Alternate(i, func() (err error) {
				if a, err = samples(e.cfg.execN, hostExec(e.host)); err != nil {
					return fmt.Errorf("this %s: %w", e.abWhat, err)
				}
				return nil
			}, func() (err error) {
				if b, err = samples(e.cfg.execN, hostExec(e.before)); err != nil {
					return fmt.Errorf("%s before: %w", e.abWhat, err)
				}
				return nil
			})
			if err != nil {
				return out, err
			}
			ab.Add(bench.Percentile(a, 50), bench.Percentile(b, 50))
		}
		out = append(out, ab)
	}
	return out, nil
}

// forward runs small HTTP requests, one new connection each, through a
// local forward: Host.Forward through the gateway against ssh -L on the
// ControlMaster connection. Host.Forward runs in this process, sharing the
// Go runtime with the HTTP client and server, while ssh -L listens in the
// ssh master, a process of its own; the extra row runs Host.Forward in a
// child hgbench (fwdproc.go) to show what that difference is worth.
func (e *env) forward(ctx context.Context) ([]*bench.Scenario, error) {
	// Every response closes its connection: the clients ask for that
	// anyway, and the gateway's preview proxy, which would otherwise keep
	// its upstream connection, opens a new channel per request too.
	rig, err := e.startForwards(ctx, false)
	if err != nil {
		return nil, err
	}
	defer rig.Close()
	web, fw, directFw := rig.web, rig.relay, rig.direct
	target := web.addr()
	child, childAddr, err := e.forwardProc(target)
	if err != nil {
		return nil, fmt.Errorf("forward child: %w", err)
	}
	defer child.Stop()
	// The same Host.Forward over the SSH layer alone, and through the
	// splice relay (relayFloor).
	floor, err := e.startRelayFloor(ctx, target)
	if err != nil {
		return nil, err
	}
	defer floor.Close()
	alone, aloneFw, relayFw := floor.alone, floor.aloneFw, floor.relayFw
	peerAddr, err := e.sshd.forwardL(ctx, target)
	if err != nil {
		return nil, err
	}
	workers := e.cfg.fwdWorkers
	const peer = "ssh -L (ControlMaster)"
	rps := &bench.Scenario{Name: "local forward, small HTTP requests", Unit: "req/s", PeerName: peer, Better: bench.Higher,
		Note: fmt.Sprintf("%d requests per side per pair, %d concurrent, a new TCP connection (so a new forwarded channel) per request", e.cfg.fwdN, workers)}
	rpsCPU := newCPURow(rps, "request")
	rpsCPU.peerShares = true
	p99 := &bench.Scenario{Name: "local forward, HTTP request p99", Unit: "ms", PeerName: peer, Better: bench.Lower}
	directRPS := &bench.Scenario{Name: "local forward, small HTTP requests, direct session", Unit: "req/s", PeerName: peer, Better: bench.Higher,
		Note: "the same load through Host.Forward over a direct session: the Go client over loopback TCP straight to the agent's --direct listener, the gateway admitting the session over the agent's tunnel and off the path after that; the client takes it by itself where the host can be reached, and the relay where not"}
	directCPU := newCPURow(directRPS, "request")
	directCPU.peerShares = true
	directP99 := &bench.Scenario{Name: "local forward, HTTP request p99, direct session", Unit: "ms", PeerName: peer, Better: bench.Lower}
	ownRPS := &bench.Scenario{Name: "local forward, small HTTP requests, Host.Forward in its own process", Unit: "req/s", PeerName: peer, Better: bench.Higher,
		Note: "the same load; Host.Forward runs in a child process, as ssh -L runs in the ssh master, instead of sharing the harness's Go runtime with the HTTP client and server"}
	previewURL := web.previewURL(e.gw, benchHostID)
	previewRPS := &bench.Scenario{Name: "local forward, small HTTP requests, through the gateway's HTTP preview", Unit: "req/s", PeerName: peer, Better: bench.Higher,
		Note: "the same load as GET /preview/{host}/{port}/ on the gateway with the admin token: the gateway is the SSH client and opens a direct-tcpip channel to the agent per request (the target closes every connection); no SSH on the caller's side"}
	previewCPU := newCPURow(previewRPS, "request")
	previewCPU.peerShares = true
	// The gateway connects to the bench host on its first preview: not in
	// a timed pair.
	if _, _, err := httpLoadAuth(ctx, previewURL, e.gw.admin, 1, 1); err != nil {
		return nil, fmt.Errorf("hostgate preview: %w", err)
	}
	aloneRPS := &bench.Scenario{Name: "local forward, small HTTP requests, SSH layer alone", Unit: "req/s", PeerName: peer, Better: bench.Higher,
		Note: "the same load through Host.Forward over the Go client straight to `agent serve --listen` over loopback TCP: no WebSocket, gateway or yamux"}
	aloneCPU := newCPURow(aloneRPS, "request")
	aloneCPU.alone, aloneCPU.peerShares = true, true
	relayRPS := &bench.Scenario{Name: "local forward, small HTTP requests, SSH layer alone through a splice relay", Unit: "req/s", PeerName: peer, Better: bench.Higher,
		Note: "the SSH layer alone's load, its connection through a relay process that moves raw bytes with splice(2) and nothing else: the floor of any gateway's relay, to read against the SSH layer alone and the full path"}
	// Seven sides per pair: hostgate, hostgate over a direct session,
	// hostgate in its own process, the SSH layer alone, the same through
	// the splice relay, the gateway's preview, the peer; odd pairs run
	// them the other way round.
	for i := range e.cfg.pairs {
		// Each request is two or three tracked connections on each side.
		if err := e.conntrackRoom(ctx, 7*3*e.cfg.fwdN); err != nil {
			return nil, err
		}
		var (
			ar, dr, or, sr, rr, pr, br float64
			al, dl, bl                 []float64
			ua, ud, us, up, ub         cpuUse
		)
		err := bench.Alternate(i, e.metered(&ua, true, func() (err error) {
			if ar, al, err = httpLoad(ctx, "http://"+fw.Addr().String()+"/", e.cfg.fwdN, workers); err != nil {
				return fmt.Errorf("hostgate: %w", err)
			}
			return nil
		}), e.metered(&ud, true, func() (err error) {
			if dr, dl, err = httpLoad(ctx, "http://"+directFw.Addr().String()+"/", e.cfg.fwdN, workers); err != nil {
				return fmt.Errorf("hostgate over a direct session: %w", err)
			}
			return nil
		}), func() (err error) {
			if or, _, err = httpLoad(ctx, "http://"+childAddr+"/", e.cfg.fwdN, workers); err != nil {
				return fmt.Errorf("hostgate in its own process: %w", err)
			}
			return nil
		}, e.meteredAlone(&us, alone.pid, func() (err error) {
			if sr, _, err = httpLoad(ctx, "http://"+aloneFw.Addr().String()+"/", e.cfg.fwdN, workers); err != nil {
				return fmt.Errorf("hostgate over the SSH layer alone: %w", err)
			}
			return nil
		}), func() (err error) {
			if rr, _, err = httpLoad(ctx, "http://"+relayFw.Addr().String()+"/", e.cfg.fwdN, workers); err != nil {
				return fmt.Errorf("hostgate through the splice relay: %w", err)
			}
			return nil
		}, e.metered(&up, true, func() (err error) {
			if pr, _, err = httpLoadAuth(ctx, previewURL, e.gw.admin, e.cfg.fwdN, workers); err != nil {
				return fmt.Errorf("hostgate preview: %w", err)
			}
			return nil
		}), e.metered(&ub, false, func() (err error) {
			if br, bl, err = httpLoad(ctx, "http://"+peerAddr+"/", e.cfg.fwdN, workers); err != nil {
				return fmt.Errorf("ssh -L: %w", err)
			}
			return nil
		}))
		if err != nil {
			return nil, err
		}
		rps.Add(ar, br)
		rpsCPU.add(ua, ub, float64(e.cfg.fwdN))
		p99.Add(bench.Percentile(al, 99), bench.Percentile(bl, 99))
		directRPS.Add(dr, br)
		directCPU.add(ud, ub, float64(e.cfg.fwdN))
		directP99.Add(bench.Percentile(dl, 99), bench.Percentile(bl, 99))
		ownRPS.Add(or, br)
		aloneRPS.Add(sr, br)
		aloneCPU.add(us, ub, float64(e.cfg.fwdN))
		relayRPS.Add(rr, br)
		previewRPS.Add(pr, br)
		previewCPU.add(up, ub, float64(e.cfg.fwdN))
	}
	out := []*bench.Scenario{rps, rpsCPU.scenario(), p99, directRPS, directCPU.scenario(), directP99, ownRPS, aloneRPS, aloneCPU.scenario(), relayRPS, previewRPS, previewCPU.scenario()}
	if e.before != nil {
		ab, err := e.forwardAB(ctx, target, workers)
		if err != nil {
			return out, err
		}
		out = append(out, ab...)
	}
	return out, nil
}

// okServer is an HTTP server on loopback that answers every request
// "ok\n": the forward rows' target.
type okServer struct {
	ln  net.Listener
	srv *http.Server
	wg  sync.WaitGroup
}

// startOK starts an okServer, which keeps its connections alive or closes
// each after its response.
func startOK(keepAlive bool) (*okServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	o := &okServer{ln: ln, srv: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	}), ReadHeaderTimeout: 10 * time.Second}}
	o.srv.SetKeepAlivesEnabled(keepAlive)
	o.wg.Go(func() { _ = o.srv.Serve(ln) })
	return o, nil
}

func (o *okServer) addr() string { return o.ln.Addr().String() }

func (o *okServer) Close() {
	_ = o.srv.Close()
	o.wg.Wait()
}

// previewURL is gw's preview of o on host.
func (o *okServer) previewURL(gw *gateway, host string) string {
	return fmt.Sprintf("%s/preview/%s/%d/", gw.url, host, o.ln.Addr().(*net.TCPAddr).Port)
}

// forwardsTo starts a local forward to target through the gateway's relay
// and the same over a direct session: the client straight to the agent's
// own listener, which the gateway admitted (agent connect --direct), where
// the host can be reached.
func (e *env) forwardsTo(ctx context.Context, target string) (relay, direct *hostgate.Forwarding, err error) {
	spec := hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: target}
	if relay, err = e.host.Forward(ctx, spec); err != nil {
		return nil, nil, err
	}
	if direct, err = e.direct.Forward(ctx, spec); err != nil {
		_ = relay.Close()
		return nil, nil, fmt.Errorf("forward over a direct session: %w", err)
	}
	return relay, direct, nil
}

// forwards is an okServer and the two forwards to it, through the relay
// and over a direct session.
type forwards struct {
	web           *okServer
	relay, direct *hostgate.Forwarding
}

// startForwards starts an okServer (see startOK) and forwardsTo it.
func (e *env) startForwards(ctx context.Context, keepAlive bool) (*forwards, error) {
	web, err := startOK(keepAlive)
	if err != nil {
		return nil, err
	}
	relay, direct, err := e.forwardsTo(ctx, web.addr())
	if err != nil {
		web.Close()
		return nil, err
	}
	return &forwards{web: web, relay: relay, direct: direct}, nil
}

func (f *forwards) Close() {
	_ = f.relay.Close()
	_ = f.direct.Close()
	f.web.Close()
}

// forwardOver starts a local forward to target over c alone (a Host with
// c as its connection). Close ends the forward and the host.
func forwardOver(ctx context.Context, c *sshlayer.Client, target string) (*closingForward, error) {
	h := hostgate.New(hostgate.Info{Kind: "machine", OS: "linux"}, func(context.Context) (*hostgate.Connection, error) {
		return c.Connection(nil), nil
	})
	fw, err := h.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: target})
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	return &closingForward{Forwarding: fw, h: h}, nil
}

// closingForward is a forward whose Close also closes its host.
type closingForward struct {
	*hostgate.Forwarding
	h *hostgate.Host
}

func (f *closingForward) Close() error {
	err := f.Forwarding.Close()
	_ = f.h.Close()
	return err
}

// relayFloor is Host.Forward to a target over the SSH layer alone: the Go
// client straight to `agent serve`, no WebSocket, gateway or yamux
// (against the full path, what the relay costs a forward; against ssh -L,
// what our SSH ends do), and the same through the cheapest relay there is
// (relayproc.go: what one more process on the path costs, whatever it does
// with the bytes).
type relayFloor struct {
	alone            *aloneAgent
	aloneFw, relayFw *closingForward
	relay            *proc
	relayed          *sshlayer.Client
}

func (e *env) startRelayFloor(ctx context.Context, target string) (_ *relayFloor, err error) {
	f := &relayFloor{}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if f.alone, err = e.agentServe(ctx); err != nil {
		return nil, fmt.Errorf("forward over the SSH layer alone: %w", err)
	}
	if f.aloneFw, err = forwardOver(ctx, f.alone.c, target); err != nil {
		return nil, fmt.Errorf("forward over the SSH layer alone: %w", err)
	}
	var relayAddr string
	if f.relay, relayAddr, err = relayProc(f.alone.addr); err != nil {
		return nil, fmt.Errorf("relay child: %w", err)
	}
	if f.relayed, err = f.alone.connect(ctx, relayAddr); err != nil {
		return nil, fmt.Errorf("forward through the splice relay: %w", err)
	}
	if f.relayFw, err = forwardOver(ctx, f.relayed, target); err != nil {
		return nil, fmt.Errorf("forward through the splice relay: %w", err)
	}
	return f, nil
}

// Close ends what startRelayFloor started, last first.
func (f *relayFloor) Close() {
	if f.relayFw != nil {
		_ = f.relayFw.Close()
	}
	if f.relayed != nil {
		_ = f.relayed.Close()
	}
	if f.relay != nil {
		f.relay.Stop()
	}
	if f.aloneFw != nil {
		_ = f.aloneFw.Close()
	}
	if f.alone != nil {
		f.alone.stop()
	}
}

// httpLoad runs n GETs with workers in parallel, each on a new connection,
// and returns requests per second and each latency in ms.
func httpLoad(ctx context.Context, url string, n, workers int) (float64, []float64, error) {
	return httpLoadAuth(ctx, url, "", n, workers)
}

// httpLoadAuth is httpLoad with a bearer token on every request.
func httpLoadAuth(ctx context.Context, url, token string, n, workers int) (float64, []float64, error) {
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	return httpLoadOn(ctx, tr, url, token, n, workers)
}

// httpLoadOn runs httpLoadAuth's load through tr.
func httpLoadOn(ctx context.Context, tr *http.Transport, url, token string, n, workers int) (float64, []float64, error) {
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	lat := make([]float64, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
	)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t0 := time.Now()
				err := get(ctx, hc, url, token)
				lat[i] = float64(time.Since(t0)) / float64(time.Millisecond)
				if err != nil {
					mu.Lock()
					errs = errors.Join(errs, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if errs != nil {
		return 0, nil, errs
	}
	return float64(n) / el.Seconds(), lat, nil
}

func get(ctx context.Context, hc *http.Client, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if err == nil && string(b) != "ok\n" {
		err = fmt.Errorf("body %q", b)
	}
	return err
}

// freePort asks the kernel for a free loopback port for ssh -L, which
// cannot report the port it bound; the tiny reuse race is acceptable in a
// harness run once on a quiet machine.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func timeIt(fn func() error) (time.Duration, error) {
	start := time.Now()
	err := fn()
	return time.Since(start), err
}

// samples runs fn n times and returns each duration in ms.
func samples(n int, fn func() error) ([]float64, error) {
	return timedSamples(n, func() (time.Duration, error) { return timeIt(fn) })
}

// timedSamples runs fn n times and returns the durations it reports, in
// ms: fn times the part that counts.
func timedSamples(n int, fn func() (time.Duration, error)) ([]float64, error) {
	out := make([]float64, 0, n)
	for range n {
		d, err := fn()
		if err != nil {
			return nil, err
		}
		out = append(out, float64(d)/float64(time.Millisecond))
	}
	return out, nil
}
