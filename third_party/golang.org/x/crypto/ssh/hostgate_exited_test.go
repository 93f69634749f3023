// Copyright 2026 The hostgate Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// hostgate: change 29 (HOSTGATE.md). A session's Exited is closed once
// the server has sent the exit status, while the channel stays open (as
// OpenSSH's sshd keeps it while a background process holds the command's
// output); Wait returns that status once the channel closes. A session
// closed without a status leaves Exited open.
func TestHostgateSessionExited(t *testing.T) {
	before := goleak.IgnoreCurrent()
	defer goleak.VerifyNone(t, before)
	a, b := testConnPair(t)
	release := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		sc, chans, reqs, err := NewServerConn(a, earlyServerConfig(t))
		if err != nil {
			served <- err
			return
		}
		go DiscardRequests(reqs)
		go func() {
			for nc := range chans {
				ch, reqs, err := nc.Accept()
				if err != nil {
					continue
				}
				go func() {
					defer ch.Close()
					r, ok := <-reqs // the exec
					if !ok {
						return
					}
					go DiscardRequests(reqs)
					_ = r.Reply(r.Type == "exec", nil)
					var cmd execMsg
					if Unmarshal(r.Payload, &cmd) != nil || cmd.Command == "silent" {
						return // closed without a status
					}
					_, _ = ch.SendRequest("exit-status", false, []byte{0, 0, 0, 3})
					<-release
				}()
			}
		}()
		served <- sc.Wait()
	}()
	c, chans, reqs, err := NewClientConn(b, "pipe", &ClientConfig{User: "u", HostKeyCallback: InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	cli := NewClient(c, chans, reqs)
	defer func() {
		_ = cli.Close()
		_ = a.Close()
		<-served
	}()

	s, err := cli.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("held"); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- s.Wait() }()
	select {
	case <-s.Exited():
	case err := <-waited:
		t.Fatalf("Wait returned %v before Exited, with the channel open", err)
	case <-time.After(10 * time.Second): // a guard against a hang, not a timing
		t.Fatal("Exited still open 10 s after the server sent the exit status")
	}
	select {
	case err := <-waited:
		t.Fatalf("Wait returned %v with the channel still open", err)
	default:
	}
	close(release)
	var ee *ExitError
	if err := <-waited; !errors.As(err, &ee) || ee.ExitStatus() != 3 {
		t.Errorf("Wait once the channel closed: %v; want exit status 3", err)
	}

	s, err = cli.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("silent"); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(); !errors.As(err, new(*ExitMissingError)) {
		t.Errorf("Wait of a session closed without a status: %v; want ExitMissingError", err)
	}
	select {
	case <-s.Exited():
		t.Error("Exited closed for a session closed without a status")
	default:
	}
}
