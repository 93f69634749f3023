//go:build unix

package sshlayer

import (
	"net"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

func TestSendLimitByRoundTrip(t *testing.T) {
	for rtt, want := range map[time.Duration]uint32{
		0:                      512 << 10,
		100 * time.Microsecond: 512 << 10,
		2 * time.Millisecond:   1_073_741, // 512 MiB/s for 2 ms
		4 * time.Millisecond:   2_147_483,
		10 * time.Second:       0, // no bound a uint32 holds: none
	} {
		if got := sendLimit(rtt); got != want {
			t.Errorf("round trip %v: send limit %d, want %d", rtt, got, want)
		}
	}
}

// An OpenSSH client that grants an 8 MiB window and reads nothing is sent
// no more than the send limit of its round trip (at most 4 MiB for one of
// 8 ms, where loopback's is under one), where before it was sent the
// whole window at once; after the stall guard's wait it is sent the rest,
// as one that waits for more before it gives window back needs. Every
// other client is sent the whole window at once.
func TestServerSendsAheadWithinLimit(t *testing.T) {
	const window = 8 << 20
	ts := srvStartServer(t, &ServerConfig{})
	for _, tc := range []struct {
		version string
		min     int64
		max     int64
	}{
		{"SSH-2.0-OpenSSH_9.2p1 Debian-2", sendLimitFloor, 4 << 20},
		{"SSH-2.0-hostgate", window, window + window/16},
		// Clients that may give window back only once it runs low.
		{"SSH-2.0-PuTTY_Release_0.81", window, window + window/16},
		{"SSH-2.0-Go", window, window + window/16},
	} {
		t.Run(tc.version, func(t *testing.T) {
			nc, err := net.Dial("tcp", ts.Addr)
			if err != nil {
				t.Fatal(err)
			}
			cc := &readCounter{Conn: nc}
			conn, chans, reqs, err := ssh.NewClientConn(cc, ts.Addr, &ssh.ClientConfig{
				User: "anyone", ClientVersion: tc.version,
				Auth:            []ssh.AuthMethod{ssh.PublicKeys(ts.ClientSigner)},
				HostKeyCallback: ssh.FixedHostKey(ts.HostPublicKey),
			})
			if err != nil {
				t.Fatal(err)
			}
			// The session opens once the server's first round trip is
			// answered, so the bound is set before any output: it holds
			// from the first byte.
			probed := make(chan struct{}, 1)
			go func() {
				for r := range reqs {
					_ = r.Reply(false, nil)
					select {
					case probed <- struct{}{}:
					default:
					}
				}
			}()
			noReqs := make(chan *ssh.Request)
			close(noReqs)
			c := ssh.NewClient(conn, chans, noReqs)
			defer c.Close()
			if sendsLimited([]byte(tc.version)) {
				select {
				case <-probed:
				case <-time.After(srvTestWait):
					t.Fatal("the server never measured the round trip")
				}
			}
			s, err := c.NewSessionWindow(window)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.StdoutPipe(); err != nil { // never read
				t.Fatal(err)
			}
			if err := s.Start("head -c 16777216 /dev/zero"); err != nil {
				t.Fatal(err)
			}
			if sendsLimited([]byte(tc.version)) {
				// The limit lets the first min through, then nothing
				// while the client gives nothing back; after the stall
				// guard's quarter second it is sent the whole window,
				// as by a server without the limit (sshd fills it too).
				if n := sentWhenStill(cc, tc.min, 60*time.Millisecond); n < tc.min || n > tc.max {
					t.Fatalf("the server sent %d bytes ahead of a client reading nothing, want %d to %d", n, tc.min, tc.max)
				}
				tc.min, tc.max = window, window+window/16
			}
			if n := sentWhenStill(cc, tc.min, 300*time.Millisecond); n < tc.min || n > tc.max {
				t.Fatalf("the server sent %d bytes ahead of a client reading nothing, want %d to %d", n, tc.min, tc.max)
			}
		})
	}
}

// sentWhenStill is how many bytes cc has read once they have stopped
// coming for still, past least (srvTestWait at most).
func sentWhenStill(cc *readCounter, least int64, still time.Duration) int64 {
	last, since := cc.n.Load(), time.Now()
	for deadline := time.Now().Add(srvTestWait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n := cc.n.Load(); n != last {
			last, since = n, time.Now()
		} else if n >= least && time.Since(since) > still {
			break
		}
	}
	return last
}
