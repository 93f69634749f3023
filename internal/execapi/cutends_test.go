package execapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	dockerclient "github.com/docker/docker/client"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/store"
)

// printWatch sees what a command's runner hands on, as the gateway
// receives it through the agent's tunnel, so that a test cuts the command
// only once its output is in the gateway's hands (cutting it sooner would
// test the race, not the answer).
type printWatch struct {
	mu             sync.Mutex
	stdout, stderr []byte
	seen           chan struct{} // closed once both end as wanted
}

// expect resets the watch for the next command and returns a channel
// closed once its stdout ends with "before\n" and its stderr with
// "warned\n".
func (w *printWatch) expect() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stdout, w.stderr = nil, nil
	w.seen = make(chan struct{})
	return w.seen
}

func (w *printWatch) wrote(stream *[]byte, p []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	*stream = append(*stream, p...)
	if w.seen != nil && bytes.HasSuffix(w.stdout, []byte("before\n")) && bytes.HasSuffix(w.stderr, []byte("warned\n")) {
		close(w.seen)
		w.seen = nil
	}
}

type watchWriter struct {
	w      io.Writer
	watch  *printWatch
	stream *[]byte
}

func (ww watchWriter) Write(p []byte) (int, error) {
	n, err := ww.w.Write(p)
	ww.watch.wrote(ww.stream, p[:n])
	return n, err
}

// watchedRunner is the agent tunnel's runner, its output watched.
type watchedRunner struct {
	r     dockerhost.CommandRunner
	watch *printWatch
}

func (r watchedRunner) Run(ctx context.Context, c dockerhost.Command) (int, error) {
	c.Stdout = watchWriter{c.Stdout, r.watch, &r.watch.stdout}
	c.Stderr = watchWriter{c.Stderr, r.watch, &r.watch.stderr}
	return r.r.Run(ctx, c)
}

// agentGateway is the executions API over the real engine, its sandboxes
// running the real agent (built here, static, as the gateway's), wired as
// cmd/gateway wires them: commands run through the agent's tunnel.
type agentGateway struct {
	h        *dockerhost.Docker
	img      string
	cli      *dockerclient.Client
	srv      *httptest.Server
	c        *client.Client
	watch    *printWatch
	tunnels  chan string // ids whose tunnel came up
	shutdown func()      // the gateway stopping: requests' contexts end with gateway.ErrShuttingDown
}

func newAgentGateway(t *testing.T) *agentGateway {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agent")
	build := exec.Command("go", "build", "-o", bin, "github.com/hostgate/hostgate/cmd/agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the agent: %v\n%s", err, out)
	}
	agentBin, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	h, img, cli := realDockerWith(t, &dockerhost.Config{Tools: []dockerhost.Tool{{Name: "agent", Mode: 0o111, Data: agentBin}}, TempDir: dockerhost.WorkspaceTempDir})
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	_, caPriv, _ := ed25519.GenerateKey(rand.Reader)
	ca, _ := ssh.NewSignerFromKey(caPriv)
	reg := gateway.NewRegistry(0, nil)
	g := &agentGateway{h: h, img: img, cli: cli, watch: &printWatch{}, tunnels: make(chan string, 64)}
	attach := func(ctx context.Context, id string, argv []string, stderr io.Writer) (Stdio, error) {
		st, err := h.AttachStdio(ctx, id, argv, stderr)
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	agents := NewAgents(attach, h.Verify, st, reg, string(ssh.MarshalAuthorizedKey(ca.PublicKey())), &AgentsConfig{
		KeyDir: filepath.Join(t.TempDir(), "keys"), MakeDirs: []string{dockerhost.WorkspaceTempDir},
		OnTunnel: func(id string, up bool) {
			if up {
				select {
				case g.tunnels <- id:
				default:
				}
			}
		},
		Certify: func(pub ssh.PublicKey, principal string) (*ssh.Certificate, error) {
			cert := &ssh.Certificate{Key: pub, CertType: ssh.UserCert, ValidPrincipals: []string{principal},
				ValidAfter: uint64(time.Now().Add(-time.Minute).Unix()), ValidBefore: uint64(time.Now().Add(time.Hour).Unix())}
			return cert, cert.SignCert(rand.Reader, ca)
		}})
	h.SetExecVia(func(id string) dockerhost.CommandRunner {
		r := agents.Runner(id)
		if r == nil {
			return nil
		}
		return watchedRunner{r, g.watch}
	})
	api, err := New(h, &Config{Authorize: func(http.ResponseWriter, *http.Request) bool { return true }, Agents: agents, Connected: reg.Connected})
	if err != nil {
		t.Fatal(err)
	}
	var cancel context.CancelCauseFunc
	g.srv, g.shutdown, cancel = serveAPI(api)
	if g.c, err = client.New(g.srv.URL, "admin-token", nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel(nil)
		g.c.CloseIdleConnections()
		g.srv.Close()
		agents.Close()
		reg.Close()
		_ = st.Close()
	})
	return g
}

func (g *agentGateway) provision(t *testing.T, ctx context.Context) string {
	t.Helper()
	e, err := g.c.Provision(ctx, client.ProvisionRequest{Image: g.img, Workspace: client.Workspace{Kind: "empty"}, Network: client.Network{Mode: "none"},
		Resources: client.Resources{CPUs: 0.5, MemoryBytes: 64 << 20, DiskBytes: 8 << 20, Pids: 64, RuntimeMs: 180_000, MaxOutputBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.h.Terminate(context.Background(), e.ExecutionID) })
	return e.ExecutionID
}

// printsThenHangs prints "before" and "warned" and sleeps past the test.
var printsThenHangs = client.ExecRequest{Command: "/bin/sh", Args: []string{"-c", "echo before; echo warned >&2; sleep 100"}, TimeoutMs: 150_000}

// cutExec runs printsThenHangs in id through the Go client, calls cut
// once the gateway has its output, and returns the answer's error.
func (g *agentGateway) cutExec(t *testing.T, ctx context.Context, id string, cut func()) *client.APIError {
	t.Helper()
	seen := g.watch.expect()
	answer := make(chan error, 1)
	go func() {
		_, err := g.c.Exec(ctx, id, printsThenHangs)
		answer <- err
	}()
	select {
	case <-seen:
	case err := <-answer:
		t.Fatalf("the command answered before it was cut: %v", err)
	case <-ctx.Done():
		t.Fatal("the command's output never reached the gateway through the agent")
	}
	cut()
	var ae *client.APIError
	if err := <-answer; !errors.As(err, &ae) {
		t.Fatalf("cut command: %v, want an API error", err)
	}
	return ae
}

// TestExecEndingsKeepOutput: a real sandbox's command, run through its
// real agent, that ends midway for any reason but its own (its agent
// killed, its execution terminated, its caller gone, the gateway
// stopping) answers with what it printed so far in the error's stdout
// and stderr, as its timeout and output limit do. They answered the code
// and message alone: the agent lost the last lines its command printed.
func TestExecEndingsKeepOutput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g := newAgentGateway(t)
	kept, terminated, aborted := g.provision(t, ctx), g.provision(t, ctx), g.provision(t, ctx)
	wantOutput := func(what string, ae *client.APIError, status int, code string) {
		t.Helper()
		if ae.Status != status || ae.Code != code || ae.Stdout != "before\n" || ae.Stderr != "warned\n" {
			t.Errorf("%s: %d %s %q, stdout %q, stderr %q; want %d %s with stdout \"before\\n\" and stderr \"warned\\n\"", what, ae.Status, ae.Code, ae.Message, ae.Stdout, ae.Stderr, status, code)
		}
	}

	// Its agent killed (sandbox code may kill it: it runs as the
	// sandbox's uid).
	info, err := g.h.Get(ctx, kept)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := g.cli.ContainerInspect(ctx, info.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	ae := g.cutExec(t, ctx, kept, func() {
		for len(g.tunnels) > 0 {
			<-g.tunnels // the first agents'
		}
		kill := exec.CommandContext(ctx, "docker", "exec", "-u", ins.Config.User, info.ContainerID, "/bin/sh", "-c", "kill -9 $(pidof agent)")
		if out, err := kill.CombinedOutput(); err != nil {
			t.Fatalf("kill the agent: %v %s", err, out)
		}
	})
	wantOutput("agent killed", ae, http.StatusBadGateway, dockerhost.CodeAgentLost)

	// Its execution terminated under it.
	ae = g.cutExec(t, ctx, terminated, func() {
		if err := g.c.Terminate(ctx, terminated); err != nil {
			t.Fatal(err)
		}
	})
	wantOutput("execution terminated", ae, http.StatusGone, dockerhost.CodeGone)

	// Its Go caller's context ending (its own deadline, say).
	seen := g.watch.expect()
	cctx, ccancel := context.WithCancel(ctx)
	go func() {
		<-seen
		ccancel()
	}()
	_, err = g.h.Exec(cctx, aborted, dockerhost.ExecRequest{Command: printsThenHangs.Command, Args: printsThenHangs.Args, TimeoutMs: printsThenHangs.TimeoutMs})
	ccancel()
	var de *dockerhost.Error
	if !errors.As(err, &de) || de.Code != dockerhost.CodeAborted || de.Output == nil {
		t.Errorf("caller gone: %v, want %s carrying the output", err, dockerhost.CodeAborted)
	} else if out, _ := de.Output.Stdout.String(); out != "before\n" {
		t.Errorf("caller gone: stdout %q, want \"before\\n\"", out)
	} else if errOut, _ := de.Output.Stderr.String(); errOut != "warned\n" {
		t.Errorf("caller gone: stderr %q, want \"warned\\n\"", errOut)
	}

	// The gateway stopping, once the killed agent's successor is up.
	for up := ""; up != kept; {
		select {
		case up = <-g.tunnels:
		case <-ctx.Done():
			t.Fatal("no new agent after the kill")
		}
	}
	ae = g.cutExec(t, ctx, kept, g.shutdown)
	wantOutput("gateway stopping", ae, http.StatusServiceUnavailable, dockerhost.CodeInterrupted)
}
