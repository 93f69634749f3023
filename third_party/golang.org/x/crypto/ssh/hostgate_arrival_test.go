// Copyright 2026 The hostgate Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// hostgate: tests of arrival numbers (arrival.go, HOSTGATE.md change 28).

// TestHostgateArrivalOrder: global requests and channel opens are numbered
// in the order the client sent them, though the server reads them from two
// Go channels, also when an open and the request behind it come in one
// write; a channel's requests have no number.
func TestHostgateArrivalOrder(t *testing.T) {
	before := goleak.IgnoreCurrent()
	defer goleak.VerifyNone(t, before)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	old := holdDelay
	holdDelay = time.Hour // held packets go only with the next one
	defer func() { holdDelay = old }()
	a, conn := testConnPair(t)
	b := &writeCounter{Conn: conn}
	opens := make(chan uint64, 4)
	globals := make(chan *Request, 4)
	chanReqs := make(chan uint64, 4)
	done := make(chan error, 1)
	go func() {
		sc, chans, reqs, err := NewServerConn(a, earlyServerConfig(t))
		if err != nil {
			done <- err
			return
		}
		go func() {
			for r := range reqs {
				_ = r.Reply(true, nil)
				globals <- r
			}
		}()
		go func() {
			for nc := range chans {
				opens <- ChannelArrival(nc)
				_, creqs, err := nc.Accept()
				if err != nil {
					continue
				}
				go func() {
					for r := range creqs {
						_ = r.Reply(true, nil)
						chanReqs <- r.Arrival()
					}
				}()
			}
		}()
		done <- sc.Wait()
	}()
	c, chans, reqs, err := NewClientConn(b, "pipe", &ClientConfig{User: "u", HostKeyCallback: InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	cli := NewClient(c, chans, reqs)
	defer func() {
		_ = cli.Close()
		<-done
	}()

	// Each open is held until the request behind it (change 25): the two
	// go in one write, as OpenSSH's ssh sends its session's open and
	// no-more-sessions@openssh.com.
	writes := b.n.Load()
	s1, err := cli.NewSessionEarly()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cli.SendRequest("first@hostgate", false, nil); err != nil {
		t.Fatal(err)
	}
	if n := b.n.Load() - writes; n != 1 {
		t.Fatalf("the open and the request behind it went in %d writes, want one", n)
	}
	if _, err := cli.NewSessionEarly(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cli.SendRequest("second@hostgate", true, nil); err != nil {
		t.Fatal(err)
	}
	if err := s1.Setenv("A", "b"); err != nil {
		t.Fatal(err)
	}

	recv := func(what string, ch <-chan uint64) uint64 {
		t.Helper()
		select {
		case n := <-ch:
			return n
		case <-ctx.Done():
			t.Fatalf("%s: the server got none", what)
			return 0
		}
	}
	global := func(want string) uint64 {
		t.Helper()
		select {
		case r := <-globals:
			if r.Type != want {
				t.Fatalf("global request %q, want %q", r.Type, want)
			}
			return r.Arrival()
		case <-ctx.Done():
			t.Fatalf("%s: the server got none", want)
			return 0
		}
	}
	got := []uint64{recv("first open", opens), global("first@hostgate"), recv("second open", opens), global("second@hostgate")}
	for i, n := range got {
		if n != uint64(i+1) {
			t.Fatalf("arrivals (open, request, open, request) %v, want 1 2 3 4", got)
		}
	}
	if n := recv("setenv", chanReqs); n != 0 {
		t.Errorf("a channel's request has arrival %d, want 0", n)
	}
}
