//go:build unix

package hostgate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/sshlayer"
)

// exampleHost is a Host over SSH to sshlayer's loopback test server (this
// machine), named "box" as client.Dial names a host by its id; stop
// closes both. The examples' host could as well come from client.Dial.
func exampleHost() (h *hostgate.Host, ts *sshlayer.TestServer, stop func()) {
	ts, err := sshlayer.StartTestServer()
	if err != nil {
		panic(err)
	}
	auth := sshlayer.Auth{PrivateKey: ts.ClientKey, HostKey: ts.HostKey, Host: "box"}
	h = hostgate.NewNamed("box", hostgate.Info{Kind: "machine"}, sshConnect(ts.Addr, auth))
	return h, ts, func() { _ = h.Close(); _ = ts.Close() }
}

// How a command ends, as an agent reads it: a non-zero exit is no error
// (it is in ExitCode), a program not found exits 127 as in a shell, and a
// command a signal killed has ExitCode -1 and the Signal, as os/exec says
// it. The error is for what kept the command from running or finishing.
func ExampleHost_Exec_exitStatus() {
	host, _, stop := exampleHost()
	defer stop()
	ctx := context.Background()

	for _, argv := range [][]string{
		{"sh", "-c", "echo tests failed >&2; exit 3"},
		{"no-such-tool", "--version"},
		{"sh", "-c", "kill -KILL $$"},
	} {
		res, err := host.Exec(ctx, argv, hostgate.ExecOptions{})
		if err != nil {
			fmt.Println("did not run:", err)
			continue
		}
		fmt.Printf("%s: exit %d, signal %q\n", argv[0], res.ExitCode, res.Signal)
	}
	// Output:
	// sh: exit 3, signal ""
	// no-such-tool: exit 127, signal ""
	// sh: exit -1, signal "KILL"
}

// Stop a command that runs too long or that the user stopped: ctx's end
// kills it on the host and Exec returns ctx's error at once, with the
// output so far in the result. Here the Stdout writer stops it once it
// printed what was wanted; context.WithTimeout bounds one the same way
// (errors.Is(err, context.DeadlineExceeded)). Exec kills the process on
// the host (a hostgate agent also ends what a closed connection left).
func ExampleHost_Exec_stop() {
	host, _, stop := exampleHost()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	var seen bytes.Buffer
	watch := writerFunc(func(p []byte) (int, error) {
		seen.Write(p)
		if strings.Contains(seen.String(), "listening") {
			cancel() // the agent has what it waited for
		}
		return len(p), nil
	})
	res, err := host.Exec(ctx, []string{"sh", "-c", "echo listening on :3000; exec sleep 600"}, hostgate.ExecOptions{Stdout: watch})
	fmt.Println(errors.Is(err, context.Canceled), res.ExitCode)
	fmt.Printf("%q\n", res.Stdout)
	// Output:
	// true -1
	// "listening on :3000\n"
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Files over SFTP: write one, read it back, and tell a missing file from
// other failures with errors.Is, as with package os. The errors name the
// host ("host box: open …: file does not exist").
func ExampleHost_FS() {
	host, _, stop := exampleHost()
	defer stop()
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	fsys, err := host.FS(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	w, err := fsys.Create(ctx, filepath.Join(dir, "notes.txt"), 0o644)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = io.WriteString(w, "step 1 done\n")
	if err := w.Close(); err != nil { // the data is on the host only now
		fmt.Println(err)
		return
	}
	r, err := fsys.Open(ctx, filepath.Join(dir, "notes.txt"))
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := io.ReadAll(r)
	_ = r.Close()
	fmt.Printf("%q\n", b)

	_, err = fsys.Stat(ctx, filepath.Join(dir, "missing.txt"))
	fmt.Println(errors.Is(err, fs.ErrNotExist), strings.HasPrefix(err.Error(), "host box: "))
	// Output:
	// "step 1 done\n"
	// true true
}

// Reach a dev server on the host through a local port. A request made
// before the server listens fails as an empty reply, the way ssh -L
// closes it; LastFailure says why by the time the request has failed.
func ExampleHost_Forward() {
	host, _, stop := exampleHost()
	defer stop()
	ctx := context.Background()

	// A port on the host that nothing listens on yet (the test server's
	// host is this machine).
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().String()
	_ = ln.Close()

	fw, err := host.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: port})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer fw.Close()
	web := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	url := "http://" + fw.Addr().String() + "/"

	if _, err := web.Get(url); err != nil {
		fmt.Println("not up:", errors.Is(fw.LastFailure(), hostgate.ErrConnectFailed), fw.Stats().Failed)
	}

	// The dev server starts (here, in this process).
	ln, err = net.Listen("tcp", port)
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello from the dev server") })}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	resp, err := web.Get(url)
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	fmt.Println(resp.StatusCode, string(b))
	// Output:
	// not up: true 1
	// 200 hello from the dev server
}

// A host whose connection is lost (its agent stopped, the gateway
// restarted, a sandbox ended) fails every later use with an error
// matching hostgate.ErrConnectionEnded (and the SSH client's own
// sshlayer.ErrConnectionLost), naming the host: Dial it again, or make
// the client with client.Options{Reconnect: true}, whose hosts connect
// again on their next use.
func ExampleHost_lostConnection() {
	host, ts, stop := exampleHost()
	defer stop()
	ctx := context.Background()

	if _, err := host.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	_ = ts.Close() // the host goes away

	_, err := host.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
	fmt.Println(errors.Is(err, hostgate.ErrConnectionEnded), errors.Is(err, sshlayer.ErrConnectionLost), strings.Contains(err.Error(), "host box: "))
	// Output:
	// true true true
}

// A process from Spawn reports its end through Wait, whose error ExitCode
// reads; Host.Exec gives it in ExecResult.ExitCode instead, with no error.
func ExampleExitCode() {
	host, _, stop := exampleHost()
	defer stop()
	ctx := context.Background()

	p, err := host.Spawn(ctx, []string{"sh", "-c", "exit 3"}, hostgate.SpawnOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	_, _ = io.Copy(io.Discard, p.Stdout()) // drained until Wait returns
	err = p.Wait()
	fmt.Println(hostgate.ExitCode(err), err)

	res, err := host.Exec(ctx, []string{"sh", "-c", "exit 3"}, hostgate.ExecOptions{})
	fmt.Println(res.ExitCode, hostgate.ExitCode(err))
	// Output:
	// 3 process exited with status 3
	// 3 0
}
