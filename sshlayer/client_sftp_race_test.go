package sshlayer

import (
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// stallingSFTPServer serves SFTP on each session's subsystem request once
// two have come (so that two first calls race to open the Client's
// session), and then, as a host that stopped answering, never ends a
// session whose client sent EOF: a client's close that waits for the
// host to end it (pkg/sftp's before its change 32) waits for ever.
func stallingSFTPServer(t *testing.T, s *countingServer) {
	t.Helper()
	var (
		mu      sync.Mutex
		arrived int
		both    = make(chan struct{})
	)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(quit); _ = s.ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := s.ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				sc, chans, reqs, err := ssh.NewServerConn(conn, s.config())
				if err != nil {
					return
				}
				defer sc.Close()
				gone := make(chan struct{})
				go func() { _ = sc.Wait(); close(gone) }()
				go ssh.DiscardRequests(reqs)
				for nc := range chans {
					ch, reqs, err := nc.Accept()
					if err != nil {
						return
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						for req := range reqs {
							if req.Type != "subsystem" {
								_ = req.Reply(false, nil)
								continue
							}
							_ = req.Reply(true, nil)
							go ssh.DiscardRequests(reqs)
							mu.Lock()
							if arrived++; arrived == 2 {
								close(both)
							}
							mu.Unlock()
							select {
							case <-both:
							case <-quit:
								return
							}
							if srv, err := sftp.NewServer(ch); err == nil {
								_ = srv.Serve()
							}
							select { // stalled: no exit, no close
							case <-quit:
							case <-gone:
							}
							return
						}
					}()
				}
			}()
		}
	}()
}

// TestSFTPLostRaceCloseHoldsNoLock: two first SFTP calls at once each open
// a session, and the one that finds the other's in place closes its own.
// That close may wait on the host (it waited for the host to end the
// session before pkg/sftp's change 32); it must not hold the Client's lock
// meanwhile, or a host that stopped answering then leaves Close (and the
// keepalive's, which would end the connection) waiting for ever.
func TestSFTPLostRaceCloseHoldsNoLock(t *testing.T) {
	s := &countingServer{userKey: nil}
	host, err := GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	user, err := GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	s.hostKey, s.userKey = host.Signer, user
	if s.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	stallingSFTPServer(t, s)
	ctx := testCtx(t)
	raw := s.dial(t)
	c, err := ConnectConfig(ctx, raw, s.auth(), &ClientConfig{KeepaliveInterval: -1})
	if err != nil {
		t.Fatal(err)
	}

	var calls sync.WaitGroup
	for range 2 {
		calls.Add(1)
		go func() {
			defer calls.Done()
			_, _ = c.sftpSession(ctx)
		}()
	}
	called := make(chan struct{})
	go func() { calls.Wait(); close(called) }()
	buf := make([]byte, 1<<20)
waitClose:
	for { // the loser's close, should it wait on the host
		n := runtime.Stack(buf, true)
		if strings.Contains(string(buf[:n]), "sftp.(*clientConn).Close") {
			break
		}
		select {
		case <-called: // its close may be over already
			break waitClose
		default:
		}
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	guard := time.NewTimer(20 * time.Second) // a bound for the failure only
	defer guard.Stop()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-guard.C:
		_ = raw.Close() // let the close end
		<-closed
		t.Fatal("Client.Close waited on the SFTP session's close to a host that does not answer: the losing session was closed under the Client's lock")
	}
	calls.Wait()
}
