//go:build unix

package hostgate_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/sshlayer"
)

// endingHost is a Host over SSH to a test server of its own, named name
// ("" for a Host from New), and the server, whose Close ends the
// connection as an agent that stopped would.
func endingHost(t *testing.T, name string) (*hostgate.Host, *sshlayer.TestServer) {
	t.Helper()
	ts, err := sshlayer.StartTestServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Close() })
	auth := sshlayer.Auth{PrivateKey: ts.ClientKey, HostKey: ts.HostKey, Host: name}
	h := hostgate.NewNamed(name, hostgate.Info{Kind: "machine"}, sshConnect(ts.Addr, auth))
	t.Cleanup(func() { _ = h.Close() })
	return h, ts
}

// TestErrorsAfterConnectionEndedMatchIt: once a host's connection ended
// by itself (here its SSH server went, as when an agent stops or a
// sandbox ends), every error of the Host and of what it handed out
// (processes, its filesystem, dials) matches hostgate.ErrConnectionEnded,
// keeping its text and type, so a caller tells "the host went" from any
// other failure without importing the transport's package; an agent's
// program checked errors.Is(err, hostgate.ErrConnectionEnded) after its
// sandbox was terminated and got false (only sshlayer.ErrConnectionLost
// matched). Errors before the end, and after the caller's own Close, do
// not match it.
func TestErrorsAfterConnectionEndedMatchIt(t *testing.T) {
	for _, name := range []string{"box", ""} {
		h, ts := endingHost(t, name)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		dir := t.TempDir()
		missing := filepath.Join(dir, "missing")

		fsys, err := h.FS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.Stat(ctx, missing); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, hostgate.ErrConnectionEnded) {
			t.Fatalf("%q: Stat of a missing file, connected: %v; want ErrNotExist alone", name, err)
		}
		p, err := h.Spawn(ctx, []string{"sleep", "60"}, hostgate.SpawnOptions{})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
		go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()

		if err := ts.Close(); err != nil { // the host goes
			t.Fatal(err)
		}

		err = p.Wait()
		if !errors.Is(err, hostgate.ErrConnectionEnded) || !errors.Is(err, sshlayer.ErrConnectionLost) {
			t.Errorf("%q: Wait of a process whose host went: %v; want ErrConnectionEnded (and ErrConnectionLost)", name, err)
		}
		// The host and what to do come first, once: the SSH client's
		// "host box:" came after "sshlayer: process:".
		if want := "host box: connection ended (connect again): sshlayer: process: "; name != "" &&
			(!strings.HasPrefix(err.Error(), want) || strings.Count(err.Error(), "host box:") != 1) {
			t.Errorf("%q: Wait of a process whose host went: %q; want it to start %q and name the host once", name, err, want)
		}
		_, err = h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
		if !errors.Is(err, hostgate.ErrConnectionEnded) {
			t.Errorf("%q: Exec on a host that went: %v; want ErrConnectionEnded", name, err)
		}
		if name != "" && !strings.Contains(err.Error(), "host box: ") {
			t.Errorf("%q: Exec on a host that went: %q does not name it", name, err)
		}
		_, err = fsys.Stat(ctx, missing)
		var pe *fs.PathError
		if !errors.Is(err, hostgate.ErrConnectionEnded) || !errors.As(err, &pe) {
			t.Errorf("%q: Stat on a host that went: %v (%T); want ErrConnectionEnded in a *fs.PathError", name, err, err)
		}
		if want := "host box: connection ended (connect again): stat " + missing + ": "; name != "" &&
			(!strings.HasPrefix(err.Error(), want) || strings.Count(err.Error(), "host box:") != 1) {
			t.Errorf("%q: Stat on a host that went: %q; want it to start %q and name the host once", name, err, want)
		}
		if _, err := h.Dial(ctx, "tcp", "127.0.0.1:1"); !errors.Is(err, hostgate.ErrConnectionEnded) {
			t.Errorf("%q: Dial on a host that went: %v; want ErrConnectionEnded", name, err)
		}
		if err := hostgate.Upload(ctx, h, os.DirFS(dir), filepath.Join(dir, "up"), nil); !errors.Is(err, hostgate.ErrConnectionEnded) {
			t.Errorf("%q: Upload to a host that went: %v; want ErrConnectionEnded", name, err)
		}

		_ = h.Close()
		_, err = h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
		if !errors.Is(err, hostgate.ErrClosed) || errors.Is(err, hostgate.ErrConnectionEnded) {
			t.Errorf("%q: Exec after Close: %v; want ErrClosed alone", name, err)
		}
	}
}
