//go:build unix

package sshlayer

import (
	"bytes"
	"math"
	"time"
)

// What the server sends ahead of an OpenSSH client, per channel: what a
// round trip at sendLimitRate carries, at least sendLimitFloor
// (ssh.ServerConn.SetSendLimit).
//
// OpenSSH's ssh reads whatever its window lets arrive and holds what its
// reader (sftp, a pipe, a terminal) has not taken yet in buffers of its
// own. A server that keeps the whole window (2 MiB) in flight to a
// client on the same machine or LAN has ssh holding most of it: its
// buffers outgrow the cache, are compacted (memmove) and remapped, and
// ssh's CPU per MiB doubled. sftp's get of 256 MiB from `agent serve`
// with ssh's default cipher (alternating, throwaway builds): ssh and sftp
// used 1.05-1.3 s at the whole window against 0.4-0.5 s at 512 KiB, and
// the download ran at 195-230 MiB/s against 320-375 (256 KiB: 300-345;
// 768 KiB and 1 MiB: 300-350; 1.5 MiB: 230-250). sshd sends no faster
// than its sftp-server reads, so ssh never holds much from it.
//
// The bound must not be what limits a transfer over a long path: a
// channel moves at most its bound per round trip. At 512 MiB/s the bound
// reaches OpenSSH's 2 MiB window at a 4 ms round trip, so past that
// nothing changes, and below it a channel may still run faster than any
// measured here. A round trip measured while the client is busy starting
// its session (0.26-1.8 ms on loopback here) errs toward a larger bound.
const (
	sendLimitFloor = 512 << 10
	sendLimitRate  = 512 << 20 // bytes per second
)

// sendProbes are when limitSends measures the round trip, after the
// handshake: the shortest is taken, since the first often waits behind
// the client's own start.
var sendProbes = []time.Duration{0, 50 * time.Millisecond, 500 * time.Millisecond}

// sendsLimited reports whether a client is sent under a send limit:
// OpenSSH's alone. A limit holds a channel until its peer gives window
// back, and a peer may wait until its window runs low before it does
// (PuTTY at half of it, hostgate's x/crypto copy in 1 MiB steps, change 3):
// under a limit smaller than that, both sides waited for good (an SFTP
// download from hostgate's client calling itself "Go" hung), until the
// stall guard (change 22) suspended a limit the peer gives nothing back
// under for a quarter second. Such a peer still waits that long once per
// channel, so the limit stays where it was measured to help. OpenSSH
// gives window back once three packets (96 KiB) are out and it has
// consumed any, far under sendLimitFloor. hostgate's own client reads only
// what its caller asks, so its window is not a buffer it fills.
func sendsLimited(version []byte) bool {
	return bytes.HasPrefix(version, []byte("SSH-2.0-OpenSSH_"))
}

// sendLimit is the send limit for a round trip of rtt; 0 for none.
func sendLimit(rtt time.Duration) uint32 {
	n := max(sendLimitFloor, rtt.Seconds()*sendLimitRate)
	if n >= math.MaxUint32 {
		return 0
	}
	return uint32(n)
}

// limitSends measures an OpenSSH client's round trip with keepalives and
// sets the connection's send limit from the shortest. The connection's
// keepalives go on lowering it (noteRTT).
func (c *serverConn) limitSends() {
	t := time.NewTimer(0)
	defer t.Stop()
	for _, d := range sendProbes {
		t.Reset(d)
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		if _, _, err := c.sc.SendRequest("keepalive@openssh.com", true, nil); err != nil {
			return // the connection is gone
		}
		c.noteRTT(time.Since(start))
	}
}

// noteRTT takes one round trip measured by a keepalive: the connection's
// is the shortest seen, as what is queued behind a probe is not the
// path's.
func (c *serverConn) noteRTT(rtt time.Duration) {
	if !c.limited {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rtt != 0 && c.rtt <= rtt {
		return
	}
	c.rtt = rtt
	if n := sendLimit(rtt); n != c.sendLimit {
		c.sendLimit = n
		c.sc.SetSendLimit(n)
		c.log.Debug("send limit", "rtt", rtt, "bytes", n)
	}
}
