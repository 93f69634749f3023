//go:build unix

package sshlayer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// SFTP v3 packet types these tests answer, beside the stall tests'.
const (
	fxpSetstat = 9
	fxpMkdir   = 14
)

// fxpNames names the requests these tests may see come late.
var fxpNames = map[byte]string{fxpOpen: "OPEN", fxpLstat: "LSTAT", fxpSetstat: "SETSTAT", fxpRemove: "REMOVE", fxpMkdir: "MKDIR", fxpStat: "STAT"}

// TestSFTPProviderSendsNothingPastCtx: a call whose ctx ends while the host
// holds the answer to one of its requests returns ctx's error, and nothing
// of the call reaches the host after, also once the held answer comes.
// Before, the call's requests ran on in a goroutine it had given up
// waiting for: Remove's REMOVE of a file, Create's truncating OPEN and
// Mkdir's chmod went out after the caller was told the call failed.
func TestSFTPProviderSendsNothingPastCtx(t *testing.T) {
	regular, dir, symlink := uint32(0o100644), uint32(0o40755), uint32(0o120777)
	cases := []struct {
		name string
		call func(p *sftpProvider, ctx context.Context) error
		// before answers the requests before the held one, in turn;
		// held is the type of the request held, heldReply its answer.
		before    []func(typ byte) []byte
		held      byte
		heldReply []byte
	}{{
		// Create on a dangling symlink takes the way that makes its
		// target: the lstat, then an open that truncates.
		name: "Create",
		call: func(p *sftpProvider, ctx context.Context) error {
			_, err := p.Create(ctx, "/link", 0o644)
			return err
		},
		before: []func(byte) []byte{
			func(byte) []byte { return sftpStatusReply(fxFailure, "exists") },      // O_EXCL open
			func(byte) []byte { return sftpModeReply(symlink) },                    // lstat
			func(byte) []byte { return sftpStatusReply(fxNoSuchFile, "dangling") }, // O_TRUNC open
		},
		held:      fxpLstat,
		heldReply: sftpStatusReply(fxNoSuchFile, "no such file"),
	}, {
		name: "Mkdir",
		call: func(p *sftpProvider, ctx context.Context) error {
			return p.Mkdir(ctx, "/d", 0o700, false)
		},
		held:      fxpMkdir,
		heldReply: sftpStatusReply(fxOK, ""),
	}, {
		name: "Remove",
		call: func(p *sftpProvider, ctx context.Context) error {
			return p.Remove(ctx, "/f", false)
		},
		held:      fxpLstat,
		heldReply: sftpModeReply(regular),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			heldNow := make(chan struct{})
			release := make(chan struct{})
			var (
				mu   sync.Mutex
				late []string // requests the host got after the call returned
			)
			n := 0
			c := scriptedSFTPServer(t, func(typ byte, _ []byte) []byte {
				if n < len(tc.before) {
					n++
					return tc.before[n-1](typ)
				}
				if n == len(tc.before) && typ == tc.held {
					n++
					close(heldNow)
					<-release
					return tc.heldReply
				}
				mu.Lock()
				late = append(late, fxpNames[typ])
				mu.Unlock()
				switch typ {
				case fxpLstat:
					return sftpModeReply(dir)
				case fxpSetstat, fxpRemove:
					return sftpStatusReply(fxOK, "")
				}
				return sftpStatusReply(fxFailure, "refused")
			})
			p := NewSFTPProvider(c).(*sftpProvider)
			before := goleak.IgnoreCurrent()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- tc.call(p, ctx) }()
			select {
			case <-heldNow:
			case err := <-done:
				t.Fatalf("%s returned %v before its request was held", tc.name, err)
			}
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("%s: %v, want ctx's error", tc.name, err)
				}
			case <-time.After(10 * time.Second): // a guard against a hang, not a timing
				t.Fatalf("%s: still waiting 10 s after its ctx ended", tc.name)
			}
			// The host answers now. Whatever the call left running has
			// ended once no goroutine of it is left: what it sent, the
			// host has answered, so has got.
			close(release)
			if err := goleak.Find(before); err != nil {
				t.Errorf("%s left goroutines running after it returned: %v", tc.name, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(late) > 0 {
				t.Errorf("%s returned ctx's error, and then the host got %v from it", tc.name, late)
			}
		})
	}
}
