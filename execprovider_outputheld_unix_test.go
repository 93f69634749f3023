//go:build unix

package hostgate_test

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/sshdtest"
	"github.com/hostgate/hostgate/internal/sshtest"
	"github.com/hostgate/hostgate/sshlayer"
)

// heldOutputProviders are ExecProviders over OpenSSH's sshd and over
// sshlayer's server whose commands find dir first on their PATH.
func heldOutputProviders(t *testing.T, dir string) map[string]hostgate.Provider {
	t.Helper()
	srv := sshdtest.Start(t, sshdtest.Options{})
	ts, auth := sshtest.Server(t)
	path := dir + ":" + os.Getenv("PATH")
	return map[string]hostgate.Provider{
		"sshd":     hostgate.ExecProvider(envTransport{sshClient(t, srv.Addr(), sshlayer.Auth{User: "root", PrivateKey: srv.UserKey, HostKey: srv.HostKey}), path}),
		"sshlayer": hostgate.ExecProvider(envTransport{sshClient(t, ts.Addr, auth), path}),
	}
}

// sshClient is an sshlayer client connected to addr, closed at cleanup.
func sshClient(t *testing.T, addr string, auth sshlayer.Auth) *sshlayer.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sshlayer.Connect(ctx, conn, auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// envTransport runs every process with PATH set to path.
type envTransport struct {
	base hostgate.Transport
	path string
}

func (e envTransport) Spawn(ctx context.Context, argv []string, opts hostgate.SpawnOptions) (hostgate.Process, error) {
	env := map[string]string{"PATH": e.path}
	for k, v := range opts.Env {
		env[k] = v
	}
	opts.Env = env
	return e.base.Spawn(ctx, argv, opts)
}

// TestExecProviderEndsWhenOutputHeld: an ExecProvider's command whose
// output a process left in the background holds (as one a host's shell
// startup files start may) exits, and over OpenSSH's sshd its session
// stays open for as long as that process lives. Stat, whose first command
// asks uname for the stat dialect, waited for that end (for ever without a
// deadline; with one it failed at it); it now takes the commands' word
// once their output has been quiet after their exit. Over sshlayer's
// server, which ends the background with the command, it answered before
// too.
func TestExecProviderEndsWhenOutputHeld(t *testing.T) {
	t.Cleanup(hostgate.SetOutputHeldGrace(2 * time.Second))
	bin, used := heldOutputTool(t, "uname")
	for over, fsys := range heldOutputProviders(t, bin) {
		t.Run(over, func(t *testing.T) {
			// A guard against a hang, not a timing.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			fi, err := fsys.Stat(ctx, "/")
			if ctx.Err() != nil {
				t.Fatalf("Stat still waiting a minute after uname exited, its output held by a process it left: %v", err)
			}
			if err != nil || !fi.IsDir() {
				t.Fatalf("Stat /: %v, %v; want a directory", fi, err)
			}
		})
	}
	used()
}

// TestExecProviderStreamEndsWhenOutputHeld: the same for Create and Open,
// whose cat leaves a process holding its stderr: over OpenSSH's sshd
// Create's Close, after cat had written the file, and Open's read, after
// the file's last byte, waited for the session's end for as long as that
// process lived. Each now ends, the file whole, once a read has waited a
// while for nothing after cat's exit.
func TestExecProviderStreamEndsWhenOutputHeld(t *testing.T) {
	t.Cleanup(hostgate.SetOutputHeldGrace(2 * time.Second))
	bin, used := heldOutputTool(t, "cat")
	for over, fsys := range heldOutputProviders(t, bin) {
		t.Run(over+"/Create", func(t *testing.T) {
			// A guard against a hang, not a timing.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			name := filepath.Join(t.TempDir(), "f")
			w, err := fsys.Create(ctx, name, 0o644)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if _, err := io.WriteString(w, "hello"); err != nil {
				t.Fatalf("Write: %v", err)
			}
			err = w.Close()
			if ctx.Err() != nil {
				t.Fatalf("Create's Close still waiting a minute after cat exited, its output held by a process it left: %v", err)
			}
			if err != nil {
				t.Fatalf("Create's Close: %v", err)
			}
			if b, err := os.ReadFile(name); err != nil || string(b) != "hello" {
				t.Fatalf("the file written: %q, %v; want hello", b, err)
			}
		})
		t.Run(over+"/Open", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			name := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(name, []byte("hello"), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := fsys.Open(ctx, name)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer r.Close()
			b, err := io.ReadAll(r)
			if ctx.Err() != nil {
				t.Fatalf("Open's read still waiting a minute after cat exited, its output held by a process it left: %q, %v", b, err)
			}
			if err != nil || string(b) != "hello" {
				t.Fatalf("Open's read: %q, %v; want hello", b, err)
			}
		})
	}
	used()
}
