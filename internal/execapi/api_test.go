package execapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
	"go.uber.org/goleak"

	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/agent"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 30 * time.Second

// fakeExecutions is an ExecutionHost in memory, validating with the real
// Policy: "flood" overflows the output limit and "spin" times out, each
// ending the execution, as dockerhost does.
type fakeExecutions struct {
	// blocked, when set, gets a value when a checkpoint with reason
	// "block" or a restore of checkpoint "block" waits for its ctx to end.
	blocked chan struct{}
	// unhold, closed, ends every "hold" command.
	unhold chan struct{}
	policy dockerhost.Policy
	mu     sync.Mutex
	live   map[string]*dockerhost.Execution
	gone   map[string]bool
	files  map[string]string // checkpoint id → "file" content
	n      int
	// checkpointCalls counts the checkpoint store calls that reached it.
	checkpointCalls int
}

func newFakeExecutions() *fakeExecutions {
	return &fakeExecutions{
		policy: dockerhost.Policy{Max: dockerhost.DefaultMaxResources()},
		live:   map[string]*dockerhost.Execution{}, gone: map[string]bool{}, files: map[string]string{},
	}
}

func (f *fakeExecutions) Provision(_ context.Context, req dockerhost.ProvisionRequest) (*dockerhost.Execution, error) {
	if err := f.policy.ValidateProvision(&req); err != nil {
		return nil, err
	}
	return f.add(req.ExecutionID, req.Image, ""), nil
}

func (f *fakeExecutions) add(id, image, from string) *dockerhost.Execution {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if id == "" {
		id = fmt.Sprintf("exec-%d", f.n)
	}
	e := &dockerhost.Execution{ExecutionID: id, Image: image, CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), RestoredFrom: from}
	f.live[id] = e
	delete(f.gone, id)
	out := *e
	return &out
}

func (f *fakeExecutions) Get(_ context.Context, id string) (*dockerhost.Execution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.live[id]; e != nil {
		out := *e
		return &out, nil
	}
	if f.gone[id] {
		return nil, &dockerhost.Error{Code: dockerhost.CodeGone, Message: "ended", Reason: dockerhost.EndOutputLimit, EndedAt: fakeEndedAt}
	}
	return nil, &dockerhost.Error{Code: dockerhost.CodeNotFound, Message: "no such execution"}
}

// fakeEndedAt is when every execution of fakeExecutions ended.
var fakeEndedAt = time.Date(2026, 12, 3, 19, 4, 44, 5e8, time.UTC)

func (f *fakeExecutions) end(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live[id] != nil {
		delete(f.live, id)
		f.gone[id] = true
	}
}

func (f *fakeExecutions) Exec(ctx context.Context, id string, req dockerhost.ExecRequest) (*dockerhost.ExecResult, error) {
	if err := f.policy.ValidateExec(&req); err != nil {
		return nil, err
	}
	if _, err := f.Get(ctx, id); err != nil {
		return nil, err
	}
	switch req.Command {
	case "flood":
		f.end(id)
		return nil, &dockerhost.Error{Code: dockerhost.CodeOutputLimit, Message: "output over the limit; the execution was destroyed"}
	case "spin":
		f.end(id)
		return nil, &dockerhost.Error{Code: dockerhost.CodeTimeout, Message: "timed out; the execution was destroyed"}
	case "engine-down":
		return nil, fmt.Errorf("dockerhost: exec: %w", io.ErrUnexpectedEOF)
	case "hold":
		// Runs until unhold is closed.
		f.blocked <- struct{}{}
		select {
		case <-f.unhold:
			return &dockerhost.ExecResult{Stdout: "held\n"}, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	case "hold-lose":
		// Runs until unhold is closed, then loses its agent whatever ctx
		// says, as a command does whose tunnel the gateway's shutdown
		// closed before keepOnShutdown's ctx saw the shutdown.
		f.blocked <- struct{}{}
		<-f.unhold
		return nil, &dockerhost.Error{Code: dockerhost.CodeAgentLost, Message: "the execution's agent ended while the command ran", Err: dockerhost.ErrRunnerLost,
			Output: &dockerhost.ExecOutput{ExitCode: -1, Stdout: dockerhost.OutputOf([]byte("before\n")), Stderr: dockerhost.OutputOf(nil)}}
	case "binary":
		return &dockerhost.ExecResult{Stdout: string(binaryInput()), Stderr: "\xff", DurationMs: 1}, nil
	case "tee":
		// stdin's bytes to stdout and, after "err:", to stderr.
		return &dockerhost.ExecResult{Stdout: req.Stdin, Stderr: "err:" + req.Stdin, DurationMs: 1}, nil
	}
	return &dockerhost.ExecResult{Stdout: strings.Join(append([]string{req.Command}, req.Args...), " ") + "\n" + req.Stdin, DurationMs: 1}, nil
}

func (f *fakeExecutions) ExecOutput(ctx context.Context, id string, req dockerhost.ExecRequest) (*dockerhost.ExecOutput, error) {
	res, err := f.Exec(ctx, id, req)
	if err != nil {
		return nil, err
	}
	return &dockerhost.ExecOutput{ExitCode: res.ExitCode, Stdout: dockerhost.OutputOf([]byte(res.Stdout)), Stderr: dockerhost.OutputOf([]byte(res.Stderr)), DurationMs: res.DurationMs, OOMKilled: res.OOMKilled}, nil
}

// block waits for ctx to end and answers as dockerhost does: interrupted
// for ErrStopping, an engine failure otherwise.
func (f *fakeExecutions) block(ctx context.Context) error {
	f.blocked <- struct{}{}
	<-ctx.Done()
	if errors.Is(context.Cause(ctx), dockerhost.ErrStopping) {
		return &dockerhost.Error{Code: dockerhost.CodeInterrupted, Message: context.Cause(ctx).Error() + ": nothing was kept"}
	}
	return fmt.Errorf("dockerhost: %w", context.Cause(ctx))
}

func (f *fakeExecutions) Checkpoint(ctx context.Context, id string, req dockerhost.CheckpointRequest) (*dockerhost.Checkpoint, error) {
	if _, err := f.Get(ctx, id); err != nil {
		return nil, err
	}
	if req.Reason == "block" && f.blocked != nil {
		return nil, f.block(ctx)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	cid := fmt.Sprintf("cafe%028x", f.n)
	f.files[cid] = req.Reason
	return &dockerhost.Checkpoint{CheckpointID: cid, ExecutionID: id, CreatedAt: time.Now(), SizeBytes: 10, SHA256: strings.Repeat("0", 64)}, nil
}

func (f *fakeExecutions) ListCheckpoints(_ context.Context, executionID string, limit int) (*dockerhost.CheckpointList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checkpointCalls++
	out := &dockerhost.CheckpointList{Checkpoints: []dockerhost.CheckpointInfo{}}
	for id, reason := range f.files {
		out.Checkpoints = append(out.Checkpoints, dockerhost.CheckpointInfo{Checkpoint: dockerhost.Checkpoint{CheckpointID: id, ExecutionID: executionID}, Reason: reason})
	}
	if limit > 0 && len(out.Checkpoints) > limit {
		out.Checkpoints, out.Truncated = out.Checkpoints[:limit], true
	}
	return out, nil
}

func (f *fakeExecutions) ListExecutions(_ context.Context, limit int) (*dockerhost.ExecutionList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if limit == 0 {
		limit = dockerhost.DefaultExecutionListLimit
	}
	out := &dockerhost.ExecutionList{Executions: []dockerhost.Execution{}}
	for _, e := range f.live {
		out.Executions = append(out.Executions, *e)
	}
	slices.SortFunc(out.Executions, func(a, b dockerhost.Execution) int { return b.CreatedAt.Compare(a.CreatedAt) })
	if len(out.Executions) > limit {
		out.Executions, out.Truncated = out.Executions[:limit], true
	}
	return out, nil
}

func (f *fakeExecutions) SetTimeout(_ context.Context, id string, runtimeMs int64) (*dockerhost.Execution, error) {
	if runtimeMs < 1 || runtimeMs > f.policy.Max.RuntimeMs {
		return nil, &dockerhost.Error{Code: dockerhost.CodeInvalidRequest, Field: "runtimeMs", Message: fmt.Sprintf("want 1 to %d (the gateway's maximum runtime), counted from now", f.policy.Max.RuntimeMs)}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.live[id]
	if e == nil {
		return nil, &dockerhost.Error{Code: dockerhost.CodeNotFound, Message: "no such execution"}
	}
	e.ExpiresAt = time.Now().Add(time.Duration(runtimeMs) * time.Millisecond)
	out := *e
	return &out, nil
}

func (f *fakeExecutions) GetCheckpoint(_ context.Context, id string) (*dockerhost.CheckpointInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checkpointCalls++
	reason, ok := f.files[id]
	if !ok {
		return nil, &dockerhost.Error{Code: dockerhost.CodeNotFound, Message: "no such checkpoint"}
	}
	return &dockerhost.CheckpointInfo{Checkpoint: dockerhost.Checkpoint{CheckpointID: id}, Reason: reason}, nil
}

func (f *fakeExecutions) DeleteCheckpoint(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checkpointCalls++
	if _, ok := f.files[id]; !ok {
		return &dockerhost.Error{Code: dockerhost.CodeNotFound, Message: "no such checkpoint"}
	}
	delete(f.files, id)
	return nil
}

func (f *fakeExecutions) Restore(ctx context.Context, req dockerhost.RestoreRequest) (*dockerhost.Execution, error) {
	if req.CheckpointID == "block" && f.blocked != nil {
		return nil, f.block(ctx)
	}
	f.mu.Lock()
	_, ok := f.files[req.CheckpointID]
	f.mu.Unlock()
	if !ok {
		return nil, &dockerhost.Error{Code: dockerhost.CodeNotFound, Message: "no such checkpoint"}
	}
	return f.add(req.ExecutionID, "img", req.CheckpointID), nil
}

func (f *fakeExecutions) Terminate(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live[id] == nil && !f.gone[id] {
		return &dockerhost.Error{Code: dockerhost.CodeNotFound, Message: "no such execution"}
	}
	delete(f.live, id)
	f.gone[id] = true
	return nil
}

var _ Executions = (*fakeExecutions)(nil)

// agentPool runs the real agent (`agent serve --stdio --mux --keys-stdin`)
// in-process for each attachment, over a loopback TCP pair standing in for
// the docker exec attachment.
type agentPool struct {
	t        testing.TB
	wg       sync.WaitGroup
	mu       sync.Mutex
	attached map[string]int
	conns    map[string]net.Conn // the agent side of the latest attachment
	// beforeAttach, when set, runs first; an error fails the attachment.
	beforeAttach func(id string) error
	// beforeAttachCtx is beforeAttach given the attachment's ctx.
	beforeAttachCtx func(ctx context.Context, id string) error
	// freezable makes attachments freezable (freeze); frozenFrom freezes
	// them as they are made, the first that many.
	freezable  bool
	frozenFrom int
	gws        map[string]*freezableConn // the gateway side of the latest freezable attachment
	// olderAgent makes the agents ignore the keys' ReportPID, as one of
	// an adopted execution's older tools volume does: they report no pid.
	olderAgent bool
	// mapPID, when set, is what the attachments' PID method answers, as
	// dockerhost.Stdio's maps the engine's pid to the container's.
	mapPID int
}

// mappedStdio is an attachment that maps its command's pid.
type mappedStdio struct {
	Stdio
	pid int
}

func (m mappedStdio) PID(context.Context) (int, error) { return m.pid, nil }

var _ pidMapper = mappedStdio{}

// olderAgentConn is the agent's end of an attachment whose keys preamble
// was read and written again without ReportPID.
type olderAgentConn struct {
	net.Conn
	r io.Reader
}

func (c olderAgentConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// asOlderAgent has conn's keys ask no pid, as an older agent reads them.
func asOlderAgent(conn net.Conn) (net.Conn, error) {
	k, err := agent.ReadStdioKeys(conn)
	if err != nil {
		return nil, err
	}
	k.ReportPID = false
	var b bytes.Buffer
	if err := agent.WriteStdioKeys(&b, k); err != nil {
		return nil, err
	}
	return olderAgentConn{conn, io.MultiReader(&b, conn)}, nil
}

func (p *agentPool) attach(ctx context.Context, id string, argv []string, stderr io.Writer) (Stdio, error) {
	if !slices.Equal(argv, DefaultAgentArgv) {
		return nil, fmt.Errorf("unexpected argv %q", argv)
	}
	if p.beforeAttach != nil {
		if err := p.beforeAttach(id); err != nil {
			return nil, err
		}
	}
	if p.beforeAttachCtx != nil {
		if err := p.beforeAttachCtx(ctx, id); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer func() { _ = ln.Close() }()
	gw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, err
	}
	ag, err := ln.Accept()
	if err != nil {
		_ = gw.Close()
		return nil, err
	}
	var gwSide Stdio = gw.(*net.TCPConn)
	p.mu.Lock()
	p.attached[id]++
	p.conns[id] = ag
	if p.freezable {
		fc := newFreezable(gw.(*net.TCPConn), &p.wg)
		if p.gws == nil {
			p.gws = map[string]*freezableConn{}
		}
		p.gws[id] = fc
		gwSide = fc
		if p.frozenFrom > 0 {
			p.frozenFrom--
			close(fc.frozen)
		}
	}
	if p.mapPID != 0 {
		gwSide = mappedStdio{gwSide, p.mapPID}
	}
	older := p.olderAgent
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		// The agent's environment is the container's, as docker exec
		// gives it, not this test process's.
		environ := strings.Split(strings.TrimSuffix(fixtureEnviron, "\x00"), "\x00")
		conn := ag
		if older {
			var err error
			if conn, err = asOlderAgent(ag); err != nil {
				fmt.Fprintln(stderr, "older agent:", err)
				_ = ag.Close()
				return
			}
		}
		err := agent.RunServe(ctx, argv[2:], &agent.ServeIO{Conn: conn, Stderr: stderr, Environ: environ})
		if err != nil {
			fmt.Fprintln(stderr, "agent:", err)
		}
		_ = ag.Close()
	}()
	return gwSide, nil
}

// freeze makes the agent of id's latest attachment answer nothing more,
// as one stopped by SIGSTOP: what it sends no longer reaches the gateway.
func (p *agentPool) freeze(id string) {
	p.mu.Lock()
	fc := p.gws[id]
	p.mu.Unlock()
	fc.once.Do(func() { close(fc.frozen) })
}

// freezableConn is the gateway's side of an attachment whose agent can be
// frozen: a pump reads the agent's bytes and passes on none once frozen,
// and writes to the agent wait for the close.
type freezableConn struct {
	*net.TCPConn
	pr        *io.PipeReader
	frozen    chan struct{}
	once      sync.Once
	closed    chan struct{}
	closeOnce sync.Once
}

func newFreezable(c *net.TCPConn, wg *sync.WaitGroup) *freezableConn {
	pr, pw := io.Pipe()
	fc := &freezableConn{TCPConn: c, pr: pr, frozen: make(chan struct{}), closed: make(chan struct{})}
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := c.Read(buf)
			select {
			case <-fc.frozen:
				// Dropped, as never sent; the pump keeps reading so
				// that the agent's writes do not block on it.
				if err != nil {
					_ = pw.CloseWithError(err)
					return
				}
				continue
			default:
			}
			if n > 0 {
				if _, werr := pw.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = pw.CloseWithError(err)
				return
			}
		}
	}()
	return fc
}

func (c *freezableConn) Read(p []byte) (int, error) { return c.pr.Read(p) }

// Write passes p to the agent, or once frozen drops it, as a stopped
// process's pipe buffer takes a little.
func (c *freezableConn) Write(p []byte) (int, error) {
	select {
	case <-c.frozen:
		select {
		case <-c.closed:
			return 0, net.ErrClosed
		default:
			return len(p), nil
		}
	default:
		return c.TCPConn.Write(p)
	}
}

func (c *freezableConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	_ = c.pr.Close()
	return c.TCPConn.Close()
}

func (p *agentPool) count(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.attached[id]
}

// killAgent cuts the latest attachment of id, as an agent crash would.
func (p *agentPool) killAgent(id string) {
	p.mu.Lock()
	c := p.conns[id]
	p.mu.Unlock()
	_ = c.Close()
}

type fixture struct {
	api    *API
	ex     *fakeExecutions
	pool   *agentPool
	st     *store.SQLite
	reg    *gateway.Registry
	agents *Agents
	ca     ssh.Signer
	srv    *httptest.Server
	events chan tunnelEvent // OnTunnel, buffered
	forgot chan string      // Forgot, buffered
	// shutdown ends every request's context as the gateway's Close does.
	shutdown func()
}

type tunnelEvent struct {
	id string
	up bool
}

// waitEvent waits for the tunnel event want.
func (f *fixture) waitEvent(t *testing.T, want tunnelEvent) {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case ev := <-f.events:
			if ev == want {
				return
			}
		case <-timer.C:
			t.Fatalf("no tunnel event %+v within %v", want, wait)
		}
	}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	_, caPriv, _ := ed25519.GenerateKey(rand.Reader)
	ca, _ := ssh.NewSignerFromKey(caPriv)
	f := &fixture{ex: newFakeExecutions(), st: st, reg: gateway.NewRegistry(0, nil), ca: ca, events: make(chan tunnelEvent, 1024), forgot: make(chan string, 1024)}
	f.pool = &agentPool{t: t, attached: map[string]int{}, conns: map[string]net.Conn{}}
	f.agents = NewAgents(f.pool.attach, func(ctx context.Context, id string) error {
		_, err := f.ex.Get(ctx, id)
		return err
	}, st, f.reg, string(ssh.MarshalAuthorizedKey(ca.PublicKey())), &AgentsConfig{Dir: t.TempDir(), ReadyTimeout: wait, KeyDir: filepath.Join(t.TempDir(), "keys"),
		OnTunnel: func(id string, up bool) {
			select {
			case f.events <- tunnelEvent{id, up}:
			default:
			}
		},
		Forgot: func(id string) {
			select {
			case f.forgot <- id:
			default:
			}
		},
		Certify: func(pub ssh.PublicKey, principal string) (*ssh.Certificate, error) {
			cert := &ssh.Certificate{Key: pub, CertType: ssh.UserCert, ValidPrincipals: []string{principal},
				ValidAfter: uint64(time.Now().Add(-time.Minute).Unix()), ValidBefore: uint64(time.Now().Add(time.Hour).Unix())}
			return cert, cert.SignCert(rand.Reader, ca)
		}})
	// The container's environment, as Runner reads it (/proc/1/environ
	// in a container).
	f.agents.environPaths = []string{filepath.Join(t.TempDir(), "environ")}
	if err := os.WriteFile(f.agents.environPaths[0], []byte(fixtureEnviron), 0o644); err != nil {
		t.Fatal(err)
	}
	api, err := New(f.ex, &Config{
		Authorize: func(w http.ResponseWriter, r *http.Request) bool {
			if r.Header.Get("Authorization") != "Bearer admin" {
				gateway.WriteError(w, http.StatusForbidden, "forbidden", "admin only")
				return false
			}
			return true
		},
		Agents:    f.agents,
		Connected: f.reg.Connected,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.api = api
	var cancel context.CancelCauseFunc
	f.srv, f.shutdown, cancel = serveAPI(api)
	t.Cleanup(func() {
		cancel(nil)
		f.srv.Close()
		f.agents.Close()
		f.reg.Close()
		f.pool.wg.Wait()
		_ = st.Close()
	})
	return f
}

// serveAPI serves api on a loopback test server whose requests' contexts
// end with gateway.ErrShuttingDown when shutdown is called, as the
// gateway's Close ends them; cancel (nil) ends them at cleanup.
func serveAPI(api *API) (srv *httptest.Server, shutdown func(), cancel context.CancelCauseFunc) {
	mux := http.NewServeMux()
	api.Register(mux)
	base, cancel := context.WithCancelCause(context.Background())
	srv = httptest.NewUnstartedServer(mux)
	srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	srv.Start()
	return srv, func() { cancel(gateway.ErrShuttingDown) }, cancel
}

func (f *fixture) do(t *testing.T, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, f.srv.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %d, not JSON: %q", method, path, res.StatusCode, raw)
		}
	}
	return res.StatusCode, out
}

func provisionBody() map[string]any {
	return map[string]any{
		"image":     "busybox@sha256:" + strings.Repeat("a", 64),
		"workspace": map[string]any{"kind": "empty"},
		"resources": map[string]any{"cpus": 1, "memoryBytes": 64 << 20, "diskBytes": 16 << 20, "pids": 64, "runtimeMs": 60000, "maxOutputBytes": 1 << 20},
		"network":   map[string]any{"mode": "none"},
	}
}

func errCode(body map[string]any) (string, string) {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	m, _ := e["message"].(string)
	return c, m
}

// sshInto opens a stream of the registered tunnel for id and runs cmd over
// SSH, pinning hostPublicKey and authenticating with a CA certificate for
// principal.
func (f *fixture) sshInto(t *testing.T, id, hostPublicKey, principal, cmd string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	conn, err := f.reg.Open(ctx, id)
	if err != nil {
		return "", err
	}
	pinned, _, _, _, err := ssh.ParseAuthorizedKey([]byte(hostPublicKey))
	if err != nil {
		t.Fatal(err)
	}
	_, userPriv, _ := ed25519.GenerateKey(rand.Reader)
	user, _ := ssh.NewSignerFromKey(userPriv)
	cert := &ssh.Certificate{Key: user.PublicKey(), CertType: ssh.UserCert, ValidPrincipals: []string{principal},
		ValidAfter: uint64(time.Now().Add(-time.Minute).Unix()), ValidBefore: uint64(time.Now().Add(time.Hour).Unix())}
	if err := cert.SignCert(rand.Reader, f.ca); err != nil {
		t.Fatal(err)
	}
	cs, _ := ssh.NewCertSigner(cert, user)
	c, chans, reqs, err := ssh.NewClientConn(conn, id, &ssh.ClientConfig{User: "u", Auth: []ssh.AuthMethod{ssh.PublicKeys(cs)},
		HostKeyCallback: ssh.FixedHostKey(pinned), Timeout: wait})
	if err != nil {
		_ = conn.Close()
		return "", err
	}
	cl := ssh.NewClient(c, chans, reqs)
	defer func() { _ = cl.Close() }()
	s, err := cl.NewSession()
	if err != nil {
		return "", err
	}
	defer func() { _ = s.Close() }()
	out, err := s.Output(cmd)
	return string(out), err
}

// TestProvisionMakesAHost is item 7 with a stand-in engine: provision
// answers the pinned key, the store pins it as a docker host, the tunnel
// is registered under the execution id, SSH with a CA certificate for that
// id reaches the real agent, and terminate unregisters the tunnel.
// DefaultAgentArgv stays what every earlier agent accepts: an execution
// adopted after an upgrade runs the agent of its own, older tools volume,
// which exits on a flag it does not know (an added --mkdir left every
// adopted execution without its agent). New settings go in the keys
// preamble, whose unknown fields old agents ignore.
func TestDefaultAgentArgvStable(t *testing.T) {
	if want := []string{"/opt/hostgate/agent", "serve", "--stdio", "--mux", "--keys-stdin", "--log-level", "warn"}; !slices.Equal(DefaultAgentArgv, want) {
		t.Fatalf("DefaultAgentArgv = %q, want %q: older agents refuse new flags", DefaultAgentArgv, want)
	}
}

// A provision whose execution is terminated while its agent starts (a
// DELETE meanwhile) answers 410, not the agent's failure with advice about
// the agent binary.
func TestProvisionTerminatedWhileAgentStarts(t *testing.T) {
	f := newFixture(t)
	f.pool.beforeAttach = func(id string) error {
		if err := f.ex.Terminate(context.Background(), id); err != nil {
			return err
		}
		return errors.New("the container is gone")
	}
	body := provisionBody()
	body["executionId"] = "deleted-early"
	status, answer := f.do(t, "POST", "/v1/executions", "admin", body)
	if e, _ := answer["error"].(map[string]any); status != http.StatusGone || e["code"] != "gone" || !strings.Contains(fmt.Sprint(e["message"]), "terminated while provisioning") {
		t.Fatalf("provision terminated meanwhile: %d %v, want 410 gone", status, answer)
	}
	if _, err := f.st.Host(context.Background(), "deleted-early"); err == nil {
		t.Error("the terminated execution's host record stayed")
	}
}

func TestProvisionMakesAHost(t *testing.T) {
	f := newFixture(t)
	status, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	if status != http.StatusCreated {
		t.Fatalf("provision: %d %v", status, body)
	}
	id, _ := body["executionId"].(string)
	hostPub, _ := body["hostPublicKey"].(string)
	if id == "" || !strings.HasPrefix(hostPub, "ssh-ed25519 ") || !strings.HasPrefix(body["hostKey"].(string), "SHA256:") || body["connected"] != true {
		t.Fatalf("provision answer: %v", body)
	}
	h, err := f.st.Host(context.Background(), id)
	if err != nil || h.Kind != HostKind || h.HostKey != hostPub || !strings.Contains(string(h.Info), `"workspace":"/workspace"`) {
		t.Fatalf("store: %+v %v", h, err)
	}
	out, err := f.sshInto(t, id, hostPub, id, "echo hello-from-$0")
	if err != nil || out != "hello-from-sh\n" {
		t.Fatalf("ssh exec: %q %v", out, err)
	}
	if _, err := f.sshInto(t, id, hostPub, "another-host", "true"); err == nil {
		t.Fatal("a certificate for another host id was accepted")
	}

	status, body = f.do(t, "GET", "/v1/executions/"+id, "admin", nil)
	if status != http.StatusOK || body["hostPublicKey"] != hostPub || body["executionId"] != id {
		t.Fatalf("get: %d %v", status, body)
	}
	if status, _ := f.do(t, "DELETE", "/v1/executions/"+id, "admin", nil); status != http.StatusNoContent {
		t.Fatalf("delete: %d", status)
	}
	if f.reg.Connected(id) || f.agents.Running(id) {
		t.Fatal("tunnel or agent loop survived terminate")
	}
	if _, err := f.st.Host(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("host record after terminate: %v, want ErrNotFound (ended sandboxes must not pile up in /v1/hosts)", err)
	}
	if status, _ := f.do(t, "DELETE", "/v1/executions/"+id, "admin", nil); status != http.StatusNoContent {
		t.Fatalf("second delete: %d, want 204 (idempotent)", status)
	}
	if status, body := f.do(t, "GET", "/v1/executions/"+id, "admin", nil); status != http.StatusGone {
		t.Fatalf("get after delete: %d %v", status, body)
	}
}

// TestListExecutions: GET /v1/executions answers the live executions,
// newest first, each as GET /v1/executions/{id} answers it; ?limit= bounds
// it with truncated set; an ended one is not listed; a bad limit, another
// parameter or a client token are refused.
func TestListExecutions(t *testing.T) {
	f := newFixture(t)
	status, body := f.do(t, "GET", "/v1/executions", "admin", nil)
	if list, ok := body["executions"].([]any); status != http.StatusOK || !ok || len(list) != 0 || body["truncated"] != false {
		t.Fatalf("empty list: %d %v", status, body)
	}
	var ids []string
	for range 3 {
		status, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
		if status != http.StatusCreated {
			t.Fatalf("provision: %d %v", status, body)
		}
		ids = append(ids, body["executionId"].(string))
		time.Sleep(2 * time.Millisecond) // distinct CreatedAt, for the order
	}
	if status, _ := f.do(t, "DELETE", "/v1/executions/"+ids[1], "admin", nil); status != http.StatusNoContent {
		t.Fatalf("delete: %d", status)
	}
	status, body = f.do(t, "GET", "/v1/executions", "admin", nil)
	list, _ := body["executions"].([]any)
	if status != http.StatusOK || len(list) != 2 || body["truncated"] != false {
		t.Fatalf("list: %d %v", status, body)
	}
	for i, want := range []string{ids[2], ids[0]} {
		got, _ := list[i].(map[string]any)
		_, one := f.do(t, "GET", "/v1/executions/"+want, "admin", nil)
		if got["executionId"] != want || !strings.HasPrefix(fmt.Sprint(got["hostKey"]), "SHA256:") || fmt.Sprint(got) != fmt.Sprint(one) {
			t.Errorf("list[%d] = %v, want what GET answers: %v", i, got, one)
		}
	}
	status, body = f.do(t, "GET", "/v1/executions?limit=1", "admin", nil)
	if list, _ := body["executions"].([]any); status != http.StatusOK || len(list) != 1 || body["truncated"] != true || list[0].(map[string]any)["executionId"] != ids[2] {
		t.Fatalf("list limit 1: %d %v", status, body)
	}
	for _, c := range []struct{ path, token, code, msg string }{
		{"/v1/executions?limit=0", "admin", "invalid_request", "limit: want a number from 1 to 10000"},
		{"/v1/executions?limit=10001", "admin", "invalid_request", "limit: "},
		{"/v1/executions?limit=x", "admin", "invalid_request", "limit: "},
		{"/v1/executions?executionId=" + ids[0], "admin", "invalid_request", "executionId: not a parameter"},
		{"/v1/executions", "client", "forbidden", ""},
	} {
		_, body := f.do(t, "GET", c.path, c.token, nil)
		if code, msg := errCode(body); code != c.code || !strings.HasPrefix(msg, c.msg) {
			t.Errorf("GET %s (%s): %v, want %s %q…", c.path, c.token, body, c.code, c.msg)
		}
	}
	if status, body := f.do(t, "PUT", "/v1/executions", "admin", nil); status != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %d %v", status, body)
	}
}

// TestSetTimeout: POST /v1/executions/{id}/timeout sets the deadline to
// now + runtimeMs and answers the execution as GET does, with it; a
// missing, zero, negative or too large runtimeMs, an unknown field, an
// unknown execution or a client token are refused, naming the field.
func TestSetTimeout(t *testing.T) {
	f := newFixture(t)
	status, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	if status != http.StatusCreated {
		t.Fatalf("provision: %d %v", status, body)
	}
	id := body["executionId"].(string)
	before := time.Now()
	status, body = f.do(t, "POST", "/v1/executions/"+id+"/timeout", "admin", map[string]any{"runtimeMs": 7200000})
	exp, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(body["expiresAt"]))
	if status != http.StatusOK || body["executionId"] != id || !strings.HasPrefix(fmt.Sprint(body["hostKey"]), "SHA256:") || exp.Before(before.Add(2*time.Hour)) || exp.After(time.Now().Add(2*time.Hour)) {
		t.Fatalf("set timeout: %d %v", status, body)
	}
	if _, got := f.do(t, "GET", "/v1/executions/"+id, "admin", nil); got["expiresAt"] != body["expiresAt"] {
		t.Fatalf("GET after: %v, want expiresAt %v", got, body["expiresAt"])
	}
	max := dockerhost.DefaultMaxResources().RuntimeMs
	for _, c := range []struct {
		path   string
		token  string
		body   any
		status int
		msg    string
	}{
		{id, "admin", map[string]any{}, http.StatusBadRequest, "runtimeMs: is required"},
		{id, "admin", map[string]any{"runtimeMs": 0}, http.StatusBadRequest, "runtimeMs: is required"},
		{id, "admin", map[string]any{"runtimeMs": -1}, http.StatusBadRequest, fmt.Sprintf("runtimeMs: want 1 to %d", max)},
		{id, "admin", map[string]any{"runtimeMs": max + 1}, http.StatusBadRequest, fmt.Sprintf("runtimeMs: want 1 to %d (the gateway's maximum runtime)", max)},
		{id, "admin", map[string]any{"runtimeMs": "1"}, http.StatusBadRequest, "runtimeMs"},
		{id, "admin", map[string]any{"timeoutMs": 1}, http.StatusBadRequest, "timeoutMs"},
		{"nonexist", "admin", map[string]any{"runtimeMs": 1000}, http.StatusNotFound, ""},
		{id, "client", map[string]any{"runtimeMs": 1000}, http.StatusForbidden, ""},
	} {
		status, body := f.do(t, "POST", "/v1/executions/"+c.path+"/timeout", c.token, c.body)
		if _, msg := errCode(body); status != c.status || !strings.Contains(msg, c.msg) {
			t.Errorf("%v (%s): %d %v, want %d %q", c.body, c.token, status, body, c.status, c.msg)
		}
	}
	if status, body := f.do(t, "GET", "/v1/executions/"+id+"/timeout", "admin", nil); status != http.StatusMethodNotAllowed {
		t.Errorf("GET …/timeout: %d %v", status, body)
	}
}

// TestAgentReattachedWhileExecutionLives: the agent dying while its
// execution lives gets a new attachment and the same pinned key; once the
// execution is gone, no re-attach.
func TestAgentReattachedWhileExecutionLives(t *testing.T) {
	f := newFixture(t)
	status, body := f.do(t, "POST", "/v1/executions", "admin", map[string]any{"executionId": "keep-1", "image": provisionBody()["image"],
		"workspace": provisionBody()["workspace"], "resources": provisionBody()["resources"], "network": provisionBody()["network"]})
	if status != http.StatusCreated {
		t.Fatalf("provision: %d %v", status, body)
	}
	hostPub := body["hostPublicKey"].(string)
	f.waitEvent(t, tunnelEvent{"keep-1", true})
	f.pool.killAgent("keep-1")
	f.waitEvent(t, tunnelEvent{"keep-1", false})
	f.waitEvent(t, tunnelEvent{"keep-1", true})
	if out, err := f.sshInto(t, "keep-1", hostPub, "keep-1", "echo back"); err != nil || out != "back\n" {
		t.Fatalf("after re-attach: %q %v", out, err)
	}
	if n := f.pool.count("keep-1"); n != 2 {
		t.Fatalf("attachments = %d, want 2", n)
	}
	f.ex.end("keep-1")
	f.pool.killAgent("keep-1")
	f.waitEvent(t, tunnelEvent{"keep-1", false})
	f.agents.Stop("keep-1") // waits for the loop, which must not have attached again
	if f.reg.Connected("keep-1") {
		t.Fatal("tunnel registered after the execution ended")
	}
	if n := f.pool.count("keep-1"); n != 2 {
		t.Fatalf("attachments = %d, want 2 (no re-attach to an ended execution)", n)
	}
}

// TestShutdownClosesTunnelsQuietly: the gateway's shutdown closes every
// execution's tunnel; the agent loop returns without re-attaching and
// without a warning. It logged "agent ended while its execution lives;
// re-attaching" for every sandbox at each stop (found by the audit32
// audit).
func TestShutdownClosesTunnelsQuietly(t *testing.T) {
	f := newFixture(t)
	var logs testenv.LogBuffer
	f.agents.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	f.waitEvent(t, tunnelEvent{id, true})
	f.reg.Close()
	f.waitEvent(t, tunnelEvent{id, false})
	f.agents.Stop(id)
	if n := f.pool.count(id); n != 1 {
		t.Errorf("attachments = %d, want 1 (no re-attach at shutdown)", n)
	}
	if strings.Contains(logs.String(), "re-attaching") || strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("the shutdown's tunnel close logged:\n%s", logs.String())
	}
}

func TestExecAndExecutionEndingErrors(t *testing.T) {
	f := newFixture(t)
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	status, body := f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", map[string]any{"command": "echo", "args": []string{"a", "b"}, "stdin": "in", "timeoutMs": 1000})
	if status != http.StatusOK || body["stdout"] != "echo a b\nin" || body["exitCode"] != float64(0) {
		t.Fatalf("exec: %d %v", status, body)
	}
	status, body = f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", map[string]any{"command": "engine-down", "timeoutMs": 1000})
	if code, msg := errCode(body); status != http.StatusBadGateway || code != "engine_error" || strings.Contains(msg, "EOF") {
		t.Fatalf("engine failure: %d %v (want 502 engine_error, no internal detail)", status, body)
	}
	status, body = f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", map[string]any{"command": "flood", "timeoutMs": 1000})
	if code, _ := errCode(body); status != http.StatusUnprocessableEntity || code != "output_limit" {
		t.Fatalf("flood: %d %v", status, body)
	}
	if f.reg.Connected(id) || f.agents.Running(id) {
		t.Fatal("host still connected after output_limit destroyed the execution")
	}
	status, body = f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", map[string]any{"command": "echo", "timeoutMs": 1000})
	if code, _ := errCode(body); status != http.StatusGone || code != "gone" {
		t.Fatalf("exec after output_limit: %d %v, want 410", status, body)
	}
	// Why and when it ended, for programs (audit31: the gateway logged
	// the reason, the caller never saw it).
	if e, _ := body["error"].(map[string]any); e["reason"] != "output_limit" || e["endedAt"] != "2026-12-03T19:04:44.5Z" {
		t.Fatalf("exec after output_limit: %v, want reason output_limit and endedAt 2026-12-03T19:04:44.5Z", body)
	}

	_, body = f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id = body["executionId"].(string)
	status, body = f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", map[string]any{"command": "spin", "timeoutMs": 10})
	if code, _ := errCode(body); status != http.StatusGatewayTimeout || code != "timeout" {
		t.Fatalf("spin: %d %v", status, body)
	}
}

func TestCheckpointRestore(t *testing.T) {
	f := newFixture(t)
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	status, body := f.do(t, "POST", "/v1/executions/"+id+"/checkpoints", "admin", map[string]any{"reason": "before"})
	cp, _ := body["checkpointId"].(string)
	if status != http.StatusCreated || cp == "" || body["sha256"] == nil {
		t.Fatalf("checkpoint: %d %v", status, body)
	}
	status, body = f.do(t, "POST", "/v1/restores", "admin", map[string]any{"checkpointId": cp, "executionId": "restored-1"})
	if status != http.StatusCreated || body["executionId"] != "restored-1" || body["restoredFrom"] != cp || body["hostPublicKey"] == nil {
		t.Fatalf("restore: %d %v", status, body)
	}
	if out, err := f.sshInto(t, "restored-1", body["hostPublicKey"].(string), "restored-1", "echo ok"); err != nil || out != "ok\n" {
		t.Fatalf("ssh into restored: %q %v", out, err)
	}
	// A restore reusing an ended execution's id pins the new key.
	_ = f.ex.Terminate(context.Background(), "restored-1")
	f.agents.Stop("restored-1")
	status, body2 := f.do(t, "POST", "/v1/restores", "admin", map[string]any{"checkpointId": cp, "executionId": "restored-1"})
	if status != http.StatusCreated || body2["hostPublicKey"] == body["hostPublicKey"] {
		t.Fatalf("restore reusing an id: %d %v", status, body2)
	}
	if status, body := f.do(t, "POST", "/v1/restores", "admin", map[string]any{"checkpointId": "nope"}); status != http.StatusNotFound {
		t.Fatalf("restore of unknown checkpoint: %d %v", status, body)
	}
}

// TestExecFieldTypeNamesThePath: a field of the wrong JSON type in an exec
// body is named by its path in the body, as a provision's are, not with
// the Go name of the struct the API's body type embeds.
func TestExecFieldTypeNamesThePath(t *testing.T) {
	f := newFixture(t)
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	for raw, want := range map[string]string{
		`{"command": "true", "timeoutMs": "100"}`:              "timeoutMs: want a JSON integer, got a string",
		`{"command": "true", "timeoutMs": 1.5}`:                "timeoutMs: want a JSON integer, got a number 1.5",
		`{"command": "true", "timeoutMs": 100, "args": "a b"}`: "args: want a JSON array, got a string",
		`{"command": "true", "timeoutMs": 100, "encoding": 1}`: "encoding: want a JSON string, got a number",
	} {
		status, body := f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", raw)
		if e, _ := body["error"].(map[string]any); status != http.StatusBadRequest || e["message"] != want {
			t.Errorf("exec %s: %d %v, want 400 %q", raw, status, body, want)
		}
	}
}

// TestTooLargeSaysWhatToDo: a body over its route's limit is 413 naming
// the limit and the way around it, a file over SFTP.
func TestTooLargeSaysWhatToDo(t *testing.T) {
	f := newFixture(t)
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	big := provisionBody()
	big["env"] = map[string]any{"BIG": strings.Repeat("x", MaxBody)}
	status, body := f.do(t, "POST", "/v1/executions", "admin", big)
	if e, _ := body["error"].(map[string]any); status != http.StatusRequestEntityTooLarge || e["code"] != "too_large" ||
		e["message"] != "request body over 65536 bytes (64 KiB), the most this route takes; a provision's or restore's env counts, and values this large belong in a file in the workspace (SFTP)" {
		t.Errorf("provision with a 64 KiB env: %d %v", status, body)
	}
	status, body = f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", map[string]any{"command": "cat", "timeoutMs": 1000, "stdin": strings.Repeat("x", MaxExecBody)})
	if e, _ := body["error"].(map[string]any); status != http.StatusRequestEntityTooLarge || e["code"] != "too_large" ||
		e["message"] != "request body over 8388608 bytes (8 MiB), the most an exec takes: send input this large as a file over SFTP (the execution is a host) and name it in the command" {
		t.Errorf("exec with 8 MiB of stdin: %d %v", status, body)
	}
}

// TestProvisionUnderAMachineID: an executionId that names a machine host is
// a conflict that says so and what to do, without a Go package's name.
func TestProvisionUnderAMachineID(t *testing.T) {
	f := newFixture(t)
	if _, err := f.st.Enroll(context.Background(), store.Enrollment{HostID: "laptop", Kind: "machine", HostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGyQ2m0s7yJ1l7Fqzvq2jk8o0nE1iYwq7m4fP3nYwq1d"}); err != nil {
		t.Fatal(err)
	}
	b := provisionBody()
	b["executionId"] = "laptop"
	status, body := f.do(t, "POST", "/v1/executions", "admin", b)
	want := `executionId: the id names a host that is not an execution: "laptop" is a "machine" host: executions and hosts share ids; provision under another executionId, or leave it out for a new one`
	if e, _ := body["error"].(map[string]any); status != http.StatusConflict || e["code"] != "conflict" || e["message"] != want {
		t.Fatalf("provision under a machine's id: %d %v, want 409 %q", status, body, want)
	}
}

// TestCheckpointWithoutBody: reason is optional, so a checkpoint asked
// for with no body at all (curl -X POST) is taken, with no reason, as
// one with {} is; a body that is not JSON is still refused.
func TestCheckpointWithoutBody(t *testing.T) {
	f := newFixture(t)
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	status, body := f.do(t, "POST", "/v1/executions/"+id+"/checkpoints", "admin", nil)
	cp, _ := body["checkpointId"].(string)
	if status != http.StatusCreated || cp == "" || body["executionId"] != id {
		t.Fatalf("checkpoint without a body: %d %v, want 201", status, body)
	}
	if status, body := f.do(t, "POST", "/v1/executions/"+id+"/checkpoints", "admin", "reason"); status != http.StatusBadRequest {
		t.Fatalf("checkpoint with a body that is not JSON: %d %v, want 400", status, body)
	}
	// Empty, and chunked (no Content-Length, as a client streaming its
	// body sends it): the same empty body, which was refused with
	// "body: not valid JSON: EOF".
	req, _ := http.NewRequest("POST", f.srv.URL+"/v1/executions/"+id+"/checkpoints", io.NopCloser(strings.NewReader("")))
	req.ContentLength = -1
	req.TransferEncoding = []string{"chunked"}
	req.Header.Set("Authorization", "Bearer admin")
	res, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("checkpoint with an empty chunked body: %d %s, want 201", res.StatusCode, raw)
	}
}

// TestCheckpointLifecycle: list, get and delete answer as the other
// routes do (admin only, JSON errors), and a malformed id is 404
// not_found at the boundary, never passed on.
func TestCheckpointLifecycle(t *testing.T) {
	f := newFixture(t)
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	var cps []string
	for _, reason := range []string{"one", "two"} {
		status, body := f.do(t, "POST", "/v1/executions/"+id+"/checkpoints", "admin", map[string]any{"reason": reason})
		if status != http.StatusCreated {
			t.Fatalf("checkpoint: %d %v", status, body)
		}
		cps = append(cps, body["checkpointId"].(string))
	}
	status, body := f.do(t, "GET", "/v1/checkpoints?executionId="+id, "admin", nil)
	if list, _ := body["checkpoints"].([]any); status != http.StatusOK || len(list) != 2 || body["truncated"] != false {
		t.Fatalf("list: %d %v", status, body)
	}
	if status, body := f.do(t, "GET", "/v1/checkpoints?limit=1", "admin", nil); status != http.StatusOK || body["truncated"] != true {
		t.Fatalf("list limit 1: %d %v", status, body)
	}
	if status, body := f.do(t, "GET", "/v1/checkpoints/"+cps[0], "admin", nil); status != http.StatusOK || body["reason"] != "one" || body["checkpointId"] != cps[0] {
		t.Fatalf("get: %d %v", status, body)
	}
	if status, body := f.do(t, "DELETE", "/v1/checkpoints/"+cps[0], "admin", nil); status != http.StatusNoContent || body != nil {
		t.Fatalf("delete: %d %v", status, body)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if status, body := f.do(t, m, "/v1/checkpoints/"+cps[0], "admin", nil); status != http.StatusNotFound {
			t.Fatalf("%s of a deleted checkpoint: %d %v", m, status, body)
		} else if code, _ := errCode(body); code != "not_found" {
			t.Fatalf("%s of a deleted checkpoint: %v, want not_found", m, body)
		}
	}
	if status, body := f.do(t, "POST", "/v1/restores", "admin", map[string]any{"checkpointId": cps[1]}); status != http.StatusCreated {
		t.Fatalf("restore of the other: %d %v", status, body)
	}

	// Refusals: none reaches the store.
	f.ex.mu.Lock()
	calls := f.ex.checkpointCalls
	f.ex.mu.Unlock()
	for _, c := range []struct {
		method, path, token string
		status              int
		code                string
	}{
		{"GET", "/v1/checkpoints", "client", http.StatusForbidden, "forbidden"},
		{"GET", "/v1/checkpoints/" + cps[1], "client", http.StatusForbidden, "forbidden"},
		{"DELETE", "/v1/checkpoints/" + cps[1], "client", http.StatusForbidden, "forbidden"},
		{"GET", "/v1/checkpoints/nope", "admin", http.StatusNotFound, "not_found"},
		{"DELETE", "/v1/checkpoints/" + strings.ToUpper(cps[1]), "admin", http.StatusNotFound, "not_found"},
		{"DELETE", "/v1/checkpoints/..%2f" + cps[1], "admin", http.StatusNotFound, "not_found"},
		{"DELETE", "/v1/checkpoints/" + cps[1] + "%00", "admin", http.StatusNotFound, "not_found"},
		{"GET", "/v1/checkpoints?limit=0", "admin", http.StatusBadRequest, "invalid_request"},
		{"GET", "/v1/checkpoints?limit=x", "admin", http.StatusBadRequest, "invalid_request"},
		{"GET", "/v1/checkpoints?limit=10001", "admin", http.StatusBadRequest, "invalid_request"},
		{"GET", "/v1/checkpoints?executionId=../x", "admin", http.StatusBadRequest, "invalid_request"},
		{"POST", "/v1/checkpoints", "admin", http.StatusMethodNotAllowed, "method_not_allowed"},
		{"PUT", "/v1/checkpoints/" + cps[1], "admin", http.StatusMethodNotAllowed, "method_not_allowed"},
	} {
		status, body := f.do(t, c.method, c.path, c.token, nil)
		if code, _ := errCode(body); status != c.status || code != c.code {
			t.Errorf("%s %s (%s): %d %v, want %d %s", c.method, c.path, c.token, status, body, c.status, c.code)
		}
	}
	f.ex.mu.Lock()
	defer f.ex.mu.Unlock()
	if f.ex.checkpointCalls != calls {
		t.Errorf("refused requests reached the store %d times", f.ex.checkpointCalls-calls)
	}
	if _, ok := f.ex.files[cps[1]]; !ok {
		t.Errorf("a refused delete deleted the checkpoint")
	}
}

// TestRefusals: bad input never reaches the engine and never answers 500;
// every refusal names its field.
func TestRefusals(t *testing.T) {
	f := newFixture(t)
	// A machine host already enrolled under this id must not be taken over.
	if _, err := f.st.Enroll(context.Background(), store.Enrollment{HostID: "laptop", Kind: "machine", HostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGyQ2m0s7yJ1l7Fqzvq2jk8o0nE1iYwq7m4fP3nYwq1d"}); err != nil {
		t.Fatal(err)
	}
	withID := provisionBody()
	withID["executionId"] = "laptop"
	cases := []struct {
		name   string
		token  string
		body   any
		status int
		field  string
	}{
		{"no token", "client", provisionBody(), http.StatusForbidden, ""},
		{"not json", "admin", "{nope", http.StatusBadRequest, "body"},
		{"trailing", "admin", `{"image":"x"} {}`, http.StatusBadRequest, "body"},
		{"unknown field", "admin", map[string]any{"image": "x", "privileged": true}, http.StatusBadRequest, "privileged"},
		{"wrong type", "admin", map[string]any{"image": 7}, http.StatusBadRequest, "image"},
		{"huge", "admin", `{"image":"` + strings.Repeat("a", MaxBody) + `"}`, http.StatusRequestEntityTooLarge, ""},
		{"bad id", "admin", map[string]any{"executionId": "../x"}, http.StatusBadRequest, "executionId"},
		{"machine id", "admin", withID, http.StatusConflict, "executionId"},
		{"tag only", "admin", func() any { b := provisionBody(); b["image"] = "busybox:latest"; return b }(), http.StatusBadRequest, "image"},
		{"malformed image", "admin", func() any {
			b := provisionBody()
			b["image"] = "busybox..x@sha256:" + strings.Repeat("a", 64)
			return b
		}(), http.StatusBadRequest, "image"},
		{"network bridge", "admin", func() any { b := provisionBody(); b["network"] = map[string]any{"mode": "bridge"}; return b }(), http.StatusBadRequest, "network.mode"},
		{"secret env", "admin", func() any { b := provisionBody(); b["env"] = map[string]any{"GITHUB_TOKEN": "x"}; return b }(), http.StatusBadRequest, "env"},
	}
	for _, field := range []string{"cpus", "memoryBytes", "diskBytes", "pids", "runtimeMs", "maxOutputBytes"} {
		b := provisionBody()
		res := map[string]any{}
		for k, v := range b["resources"].(map[string]any) {
			if k != field {
				res[k] = v
			}
		}
		b["resources"] = res
		cases = append(cases, struct {
			name   string
			token  string
			body   any
			status int
			field  string
		}{"missing " + field, "admin", b, http.StatusBadRequest, "resources." + field})
	}
	for _, c := range cases {
		status, body := f.do(t, "POST", "/v1/executions", c.token, c.body)
		code, msg := errCode(body)
		if status != c.status || code == "" || !strings.HasPrefix(msg, c.field) {
			t.Errorf("%s: %d %q %q, want %d naming %q", c.name, status, code, msg, c.status, c.field)
		}
	}
	if n := len(f.ex.live); n != 0 {
		t.Fatalf("%d executions left after refusals", n)
	}
	if h, _ := f.st.Host(context.Background(), "laptop"); h.Kind != "machine" {
		t.Fatalf("machine host changed: %+v", h)
	}
	for _, p := range []string{"PUT /v1/executions", "PATCH /v1/executions/x", "GET /v1/executions/x/exec", "GET /v1/restores"} {
		m, path, _ := strings.Cut(p, " ")
		if status, body := f.do(t, m, path, "admin", nil); status != http.StatusMethodNotAllowed || body["error"] == nil {
			t.Errorf("%s: %d %v, want a JSON 405", p, status, body)
		}
	}
	status, body := f.do(t, "POST", "/v1/executions/nope/exec", "admin", map[string]any{"command": "x", "timeoutMs": 1})
	if status != http.StatusNotFound {
		t.Fatalf("exec on unknown: %d %v", status, body)
	}
	_, body = f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	status, body = f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", map[string]any{"command": "x"})
	if _, msg := errCode(body); status != http.StatusBadRequest || !strings.HasPrefix(msg, "timeoutMs") {
		t.Fatalf("exec without timeoutMs: %d %v", status, body)
	}
}

// TestResumeKeepsThePinnedKey: a restarted gateway (a new Agents on the
// same store and key dir) resumes an execution with the key callers
// pinned; an ended execution's key is deleted and the next agent for that
// id gets a new one.
func TestResumeKeepsThePinnedKey(t *testing.T) {
	f := newFixture(t)
	status, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	if status != http.StatusCreated {
		t.Fatalf("provision: %d %v", status, body)
	}
	id, hostPub := body["executionId"].(string), body["hostPublicKey"].(string)
	f.agents.Stop(id) // the gateway going away; the execution lives on

	restarted := NewAgents(f.pool.attach, func(ctx context.Context, id string) error {
		_, err := f.ex.Get(ctx, id)
		return err
	}, f.st, f.reg, string(ssh.MarshalAuthorizedKey(f.ca.PublicKey())), &AgentsConfig{ReadyTimeout: wait, KeyDir: f.agents.cfg.KeyDir, Dir: f.agents.cfg.Dir})
	defer restarted.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	pub, err := restarted.Resume(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))); got != hostPub {
		t.Fatalf("resumed with key %s, pinned %s", got, hostPub)
	}
	if out, err := f.sshInto(t, id, hostPub, id, "echo resumed"); err != nil || out != "resumed\n" {
		t.Fatalf("ssh after resume: %q %v", out, err)
	}
	_ = f.ex.Terminate(ctx, id)
	restarted.Forget(id)
	if _, err := os.Stat(filepath.Join(f.agents.cfg.KeyDir, id+".key")); !os.IsNotExist(err) {
		t.Fatalf("key file of an ended execution: %v", err)
	}
	f.ex.add(id, "img", "")
	pub2, err := restarted.Resume(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub2))) == hostPub {
		t.Fatal("a new execution under an ended one's id got the old key")
	}
	if h, _ := f.st.Host(ctx, id); h.HostKey == hostPub {
		t.Fatal("store still pins the old key")
	}

	// At start, keys of executions that ended meanwhile are deleted.
	stale := filepath.Join(f.agents.cfg.KeyDir, "ended-1.key")
	if err := os.WriteFile(stale, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	restarted.Prune(ctx, []string{id})
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale key survived Prune: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.agents.cfg.KeyDir, id+".key")); err != nil {
		t.Fatalf("a live execution's key was pruned: %v", err)
	}
}

// TestAgentThatCannotStart: when the agent never comes up (a wrong
// --agent-binary), provisioning answers 502 agent_failed after bounded
// retries and the execution is terminated, never left as a host-less
// container.
func TestAgentThatCannotStart(t *testing.T) {
	ex := newFakeExecutions()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg := gateway.NewRegistry(0, nil)
	defer reg.Close()
	attempts := 0
	var mu sync.Mutex
	agents := NewAgents(func(context.Context, string, []string, io.Writer) (Stdio, error) {
		mu.Lock()
		attempts++
		mu.Unlock()
		return nil, errors.New("exec format error")
	}, func(ctx context.Context, id string) error {
		_, err := ex.Get(ctx, id)
		return err
	}, st, reg, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGyQ2m0s7yJ1l7Fqzvq2jk8o0nE1iYwq7m4fP3nYwq1d", &AgentsConfig{MaxRestarts: 2, ReadyTimeout: wait})
	defer agents.Close()
	api, err := New(ex, &Config{Authorize: func(http.ResponseWriter, *http.Request) bool { return true }, Agents: agents})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	b, _ := json.Marshal(provisionBody())
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/executions", bytes.NewReader(b)))
	var body map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	if code, _ := errCode(body); rec.Code != http.StatusBadGateway || code != "agent_failed" {
		t.Fatalf("provision with a broken agent: %d %v", rec.Code, body)
	}
	mu.Lock()
	n := attempts
	mu.Unlock()
	if n != 3 {
		t.Fatalf("attach attempts = %d, want 1 + MaxRestarts(2)", n)
	}
	if len(ex.live) != 0 || len(ex.gone) != 1 {
		t.Fatalf("execution not terminated: live %v gone %v", ex.live, ex.gone)
	}
	// Nor left as a host: its key was pinned before the agent failed.
	hosts, err := st.Hosts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 0 {
		t.Fatalf("a failed provision left hosts %+v", hosts)
	}
}

// reply is a status and a JSON body that postAsync got.
type reply struct {
	status int
	body   map[string]any
}

// postAsync POSTs body to path as admin on a goroutine of its own (f.do
// fails with t.Fatal, which is for the test's goroutine) and sends the
// reply on the channel returned.
func (f *fixture) postAsync(t *testing.T, path string, body any) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		j, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", f.srv.URL+path, bytes.NewReader(j))
		req.Header.Set("Authorization", "Bearer admin")
		res, err := f.srv.Client().Do(req)
		if err != nil {
			t.Error(err)
			ch <- reply{}
			return
		}
		defer res.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		ch <- reply{res.StatusCode, out}
	}()
	return ch
}

// TestShutdownInterruptsCheckpointRestore: a checkpoint or a restore cut
// by the gateway shutting down answers 503 interrupted, as a command does:
// the API hands dockerhost ErrStopping for the gateway's ErrShuttingDown.
// Both answered 502 engine_error.
func TestShutdownInterruptsCheckpointRestore(t *testing.T) {
	f := newFixture(t)
	f.ex.blocked = make(chan struct{}, 2)
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	checkpoint := f.postAsync(t, "/v1/executions/"+id+"/checkpoints", map[string]any{"reason": "block"})
	restore := f.postAsync(t, "/v1/restores", map[string]any{"checkpointId": "block"})
	<-f.ex.blocked
	<-f.ex.blocked
	f.shutdown()
	for _, a := range []reply{<-checkpoint, <-restore} {
		if code, msg := errCode(a.body); a.status != http.StatusServiceUnavailable || code != dockerhost.CodeInterrupted || !strings.Contains(msg, "shutting down") {
			t.Errorf("cut by the shutdown: %d %v, want 503 interrupted", a.status, a.body)
		}
	}
}

// TestShutdownCutCommandIsInterrupted: the gateway's shutdown ends the
// request contexts and then closes the tunnels; a command whose agent's
// tunnel closed answers 503 interrupted, its execution kept, even when
// the runner saw the tunnel end before keepOnShutdown's context (ended by
// a goroutine of its own) said the gateway stops. It answered 502
// agent_lost (e2e TestExecutionAdoptedAfterRestart failed once in CI).
func TestShutdownCutCommandIsInterrupted(t *testing.T) {
	f := newFixture(t)
	f.ex.blocked = make(chan struct{}, 1)
	f.ex.unhold = make(chan struct{})
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	answers := f.postAsync(t, "/v1/executions/"+id+"/exec", map[string]any{"command": "hold-lose", "timeoutMs": 60000})
	select {
	case <-f.ex.blocked:
	case a := <-answers:
		t.Fatalf("the command was answered before it ran: %d %v", a.status, a.body)
	}
	f.shutdown()
	close(f.ex.unhold)
	a := <-answers
	if code, msg := errCode(a.body); a.status != http.StatusServiceUnavailable || code != dockerhost.CodeInterrupted || !strings.Contains(msg, "shutting down") || !strings.Contains(msg, "kept") {
		t.Errorf("a command cut by the shutdown: %d %v, want 503 interrupted saying the execution is kept", a.status, a.body)
	}
	// What the command printed goes on from the agent_lost to the answer.
	if e, _ := a.body["error"].(map[string]any); e["stdout"] != "before\n" || e["stderr"] != "" {
		t.Errorf("a command cut by the shutdown: %v, want its stdout \"before\\n\" and stderr \"\"", a.body)
	}
	if _, err := f.ex.Get(context.Background(), id); err != nil {
		t.Errorf("the execution after its command was cut: %v, want kept", err)
	}
}

// TestPruneForgetsEndedExecutionHosts: at start, the host records of
// executions that are not live (their containers went while no gateway
// ran, or their Forget met a full disk) are deleted; live executions and
// machines keep theirs. Before, each stayed in /v1/hosts for good as a
// disconnected docker host whose execution answered 404 (found live: a
// sandbox removed while the gateway was stopped).
func TestPruneForgetsEndedExecutionHosts(t *testing.T) {
	f := newFixture(t)
	status, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	if status != http.StatusCreated {
		t.Fatalf("provision: %d %v", status, body)
	}
	live := body["executionId"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	key := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	for _, h := range []struct{ id, kind string }{{"ended-1", HostKind}, {"machine-1", "machine"}} {
		if _, err := f.st.Enroll(ctx, store.Enrollment{HostID: h.id, Kind: h.kind, HostKey: key}); err != nil {
			t.Fatal(err)
		}
	}
	putShares(t, f.st, "ended-1", live, "machine-1")
	f.agents.Prune(ctx, []string{live})
	if _, err := f.st.Host(ctx, "ended-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the host of an execution that is not live: %v, want it forgotten", err)
	}
	for _, id := range []string{live, "machine-1"} {
		if _, err := f.st.Host(ctx, id); err != nil {
			t.Errorf("host %s after Prune: %v, want it kept", id, err)
		}
	}
	if got := sharedHosts(t, f.st); !slices.Equal(got, []string{live, "machine-1"}) {
		t.Errorf("shares' hosts after Prune: %v, want the ended execution's gone, %s's and machine-1's kept", got, live)
	}
	// The gateway is told each host forgotten, by Prune and by an
	// execution's end, so that its shares in memory go with the record.
	if status, body := f.do(t, "DELETE", "/v1/executions/"+live, "admin", nil); status != http.StatusNoContent {
		t.Fatalf("terminate: %d %v", status, body)
	}
	for _, want := range []string{"ended-1", live} {
		select {
		case got := <-f.forgot:
			if got != want {
				t.Fatalf("told %s forgotten, want %s", got, want)
			}
		case <-time.After(wait):
			t.Fatalf("never told %s forgotten", want)
		}
	}
	if _, err := f.st.Host(ctx, live); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the host of a terminated execution: %v, want it forgotten", err)
	}
}

// putShares stores a share of port 3000 of each host.
func putShares(t *testing.T, st *store.SQLite, hosts ...string) {
	t.Helper()
	now := time.Now()
	for _, h := range hosts {
		if err := st.PutShare(context.Background(), store.Share{HostID: h, Port: 3000, By: "t", Created: now, Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
}

// sharedHosts is the hosts of the stored shares, sorted.
func sharedHosts(t *testing.T, st *store.SQLite) []string {
	t.Helper()
	all, err := st.Shares(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, sh := range all {
		hosts = append(hosts, sh.HostID)
	}
	slices.Sort(hosts)
	return hosts
}

// TestEndedExecutionSharesDeleted: an execution's end deletes its shares
// from the store with its host record. They were refused at their next
// lookup, but their rows stayed until one came, up to their 7 days.
func TestEndedExecutionSharesDeleted(t *testing.T) {
	f := newFixture(t)
	var ids []string
	for range 2 {
		status, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
		if status != http.StatusCreated {
			t.Fatalf("provision: %d %v", status, body)
		}
		ids = append(ids, body["executionId"].(string))
	}
	putShares(t, f.st, ids...)
	if status, body := f.do(t, "DELETE", "/v1/executions/"+ids[0], "admin", nil); status != http.StatusNoContent {
		t.Fatalf("delete: %d %v", status, body)
	}
	if got := sharedHosts(t, f.st); !slices.Equal(got, ids[1:]) {
		t.Fatalf("shares' hosts right after %s ended: %v, want only %s's", ids[0], got, ids[1])
	}
}

// Exec requests with large stdin hold the memory kept for them at most:
// one past it is answered 503 busy, saying why and when to retry, while a
// small command still runs and, once the large ones end, a large one runs
// again. Forty requests with 8 MiB of stdin each, for a command that never
// read it, took the gateway from 49 MB to 987 MB of RSS (found by the
// sandboxmem audit).
func TestExecBodiesHoldBoundedMemory(t *testing.T) {
	f := newFixture(t)
	f.api.bodyMem.limit = 12 << 20 // two of the 2 MiB bodies below
	f.ex.blocked, f.ex.unhold = make(chan struct{}, 2), make(chan struct{})
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	stdin := strings.Repeat("x", 2<<20)
	exec := func(command string) (*http.Response, error) {
		j, _ := json.Marshal(map[string]any{"command": command, "stdin": stdin, "timeoutMs": 60000})
		req, _ := http.NewRequest("POST", f.srv.URL+"/v1/executions/"+id+"/exec", bytes.NewReader(j))
		req.Header.Set("Authorization", "Bearer admin")
		return f.srv.Client().Do(req)
	}
	done := make(chan int, 2)
	for range 2 {
		go func() {
			res, err := exec("hold")
			if err != nil {
				t.Error(err)
				done <- 0
				return
			}
			_ = res.Body.Close()
			done <- res.StatusCode
		}()
	}
	<-f.ex.blocked
	<-f.ex.blocked
	res, err := exec("echo")
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	_ = res.Body.Close()
	if code, msg := errCode(out); res.StatusCode != http.StatusServiceUnavailable || code != "busy" || !strings.Contains(msg, "retry") || res.Header.Get("Retry-After") == "" {
		t.Errorf("a third 2 MiB stdin: %d %q %.200q (Retry-After %q), want 503 busy saying to retry, with Retry-After", res.StatusCode, code, msg, res.Header.Get("Retry-After"))
	}
	if status, body := f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", map[string]any{"command": "echo", "args": []string{"hi"}, "timeoutMs": 1000}); status != http.StatusOK || body["stdout"] != "echo hi\n" {
		t.Errorf("a small command meanwhile: %d %v, want it run", status, body)
	}
	// Their bodies' memory is given back before they are answered.
	close(f.ex.unhold)
	for range 2 {
		if status := <-done; status != http.StatusOK {
			t.Fatalf("a held command: %d, want 200", status)
		}
	}
	if status, body := f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", map[string]any{"command": "echo", "stdin": stdin, "timeoutMs": 60000}); status != http.StatusOK || len(body["stdout"].(string)) != len("echo\n")+len(stdin) {
		t.Errorf("a 2 MiB stdin once the others ended: %d, want it run", status)
	}
}

// TestUnknownFieldPaths: a field no body takes is named by its path in
// the body, with the fields its object takes: one inside resources was
// named without its parent ("cpu: unknown field").
func TestUnknownFieldPaths(t *testing.T) {
	f := newFixture(t)
	typo := provisionBody()
	typo["resources"].(map[string]any)["cpu"] = 1
	ws := provisionBody()
	ws["workspace"] = map[string]any{"kind": "git-worktree", "repoPath": "/src"}
	top := provisionBody()
	top["privileged"] = true
	// encoding/json matches a field in any case, and so does the walk.
	folded := provisionBody()
	folded["Resources"] = folded["resources"]
	delete(folded, "resources")
	folded["Resources"].(map[string]any)["CPUS"] = 2
	folded["Resources"].(map[string]any)["swap"] = 1
	for _, c := range []struct {
		name, path string
		body       any
		want       string
	}{
		{"resources", "/v1/executions", typo, "resources.cpu: unknown field; resources takes cpus, memoryBytes, diskBytes, pids, runtimeMs, maxOutputBytes"},
		{"workspace", "/v1/executions", ws, "workspace.repoPath: unknown field; workspace takes kind, repositoryPath, revision"},
		{"top", "/v1/executions", top, "privileged: unknown field; the body takes executionId, image, workspace, resources, network, env"},
		{"folded", "/v1/executions", folded, "Resources.swap: unknown field; Resources takes cpus, memoryBytes, diskBytes, pids, runtimeMs, maxOutputBytes"},
		{"exec", "/v1/executions/x/exec", map[string]any{"command": "true", "timeout": 5}, "timeout: unknown field; the body takes command, args, env, cwd, stdin, timeoutMs, encoding"},
		{"restore", "/v1/restores", map[string]any{"checkpoint": "c"}, "checkpoint: unknown field; the body takes checkpointId, executionId, env"},
		{"checkpoint", "/v1/executions/x/checkpoints", map[string]any{"why": "c"}, "why: unknown field; the body takes reason"},
	} {
		status, body := f.do(t, "POST", c.path, "admin", c.body)
		if code, msg := errCode(body); status != http.StatusBadRequest || code != "invalid_request" || msg != c.want {
			t.Errorf("%s: %d %q %q, want 400 invalid_request %q", c.name, status, code, msg, c.want)
		}
	}
}

// TestDuplicateKeysRefused: encoding/json keeps the last of a key sent
// twice, so "timeoutMs":5000,"timeoutMs":1 ran the command with 1 ms and
// destroyed the execution, where a proxy or log reading the first saw
// 5000. A key twice in one object (a struct's in any case, as
// encoding/json matches them) is refused, and nothing runs.
func TestDuplicateKeysRefused(t *testing.T) {
	f := newFixture(t)
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	for _, c := range []struct{ path, body, want string }{
		{"/v1/executions/" + id + "/exec", `{"command":"echo","timeoutMs":5000,"timeoutMs":1}`, "timeoutMs: appears twice in its object; send each key once"},
		{"/v1/executions/" + id + "/exec", `{"command":"echo","timeoutMs":5000,"TIMEOUTMS":1}`, "TIMEOUTMS: appears twice in its object; send each key once"},
		{"/v1/executions/" + id + "/exec", `{"command":"echo","env":{"A":"1","\u0041":"2"},"timeoutMs":5000}`, "env.A: appears twice in its object; send each key once"},
		{"/v1/executions", `{"image":"x","resources":{"cpus":1,"cpus":2}}`, "resources.cpus: appears twice in its object; send each key once"},
		{"/v1/executions/" + id + "/timeout", `{"runtimeMs":60000,"runtimeMs":1000}`, "runtimeMs: appears twice in its object; send each key once"},
	} {
		status, body := f.do(t, "POST", c.path, "admin", c.body)
		if code, msg := errCode(body); status != http.StatusBadRequest || code != "invalid_request" || msg != c.want {
			t.Errorf("%s %s: %d %q %q, want 400 invalid_request %q", c.path, c.body, status, code, msg, c.want)
		}
	}
	// env names differ in case: two variables, as they are to the command.
	status, body := f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", `{"command":"echo","env":{"PATH":"/bin","path":"x"},"timeoutMs":5000}`)
	if status != http.StatusOK {
		t.Fatalf("env PATH and path: %d %v, want 200", status, body)
	}
}

// TestEncodedBodyRefused: an exec body sent gzipped is refused naming
// Content-Encoding and the fix, not as "invalid character '\x1f'".
func TestEncodedBodyRefused(t *testing.T) {
	f := newFixture(t)
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	req, _ := http.NewRequest("POST", f.srv.URL+"/v1/executions/"+id+"/exec", strings.NewReader(`{"command":"echo","timeoutMs":5000}`))
	req.Header.Set("Authorization", "Bearer admin")
	req.Header.Set("Content-Encoding", "gzip")
	res, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	if code, msg := errCode(out); res.StatusCode != http.StatusBadRequest || code != "invalid_request" || !strings.Contains(msg, `Content-Encoding "gzip"`) {
		t.Fatalf("gzip exec body: %d %s, want 400 invalid_request naming Content-Encoding", res.StatusCode, raw)
	}
}

// TestListParamsRefused: GET /v1/checkpoints ignored a parameter it does
// not take, so a misspelt filter (?executionid=X) listed every
// checkpoint, and took the first of a parameter given twice. Both lists
// refuse either, naming the parameter, and an empty ?executionId= too.
func TestListParamsRefused(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct{ path, want string }{
		{"/v1/checkpoints?executionid=x", "executionid: not a parameter of GET /v1/checkpoints (it takes executionId and limit)"},
		{"/v1/checkpoints?executionId=a&executionId=b", "executionId: given more than once; give it once"},
		{"/v1/checkpoints?limit=1&limit=2", "limit: given more than once; give it once"},
		{"/v1/executions?limit=1&limit=2", "limit: given more than once; give it once"},
		{"/v1/executions?state=live", "state: not a parameter of GET /v1/executions (it takes limit only)"},
		// audit42: an empty filter listed every checkpoint.
		{"/v1/checkpoints?executionId=", "executionId: empty; give an execution's id, or leave the parameter out to list every checkpoint"},
		{"/v1/checkpoints?limit=5&executionId", "executionId: empty; give an execution's id, or leave the parameter out to list every checkpoint"},
	} {
		status, body := f.do(t, "GET", c.path, "admin", nil)
		if code, msg := errCode(body); status != http.StatusBadRequest || code != "invalid_request" || msg != c.want {
			t.Errorf("%s: %d %q %q, want 400 invalid_request %q", c.path, status, code, msg, c.want)
		}
	}
	for _, path := range []string{"/v1/checkpoints?executionId=x&limit=5", "/v1/checkpoints", "/v1/executions?limit=5"} {
		if status, body := f.do(t, "GET", path, "admin", nil); status != http.StatusOK {
			t.Errorf("%s: %d %v, want 200", path, status, body)
		}
	}
}

// TestBodyNotUTF8Refused: raw bytes in an exec's stdin reached the
// command as U+FFFD (encoding/json's replacement), with no sign; a body
// that is not UTF-8 is refused, pointing at base64, and nothing runs.
func TestBodyNotUTF8Refused(t *testing.T) {
	f := newFixture(t)
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	status, body := f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", "{\"command\":\"cat\",\"stdin\":\"\xff\xfe\",\"timeoutMs\":5000}")
	if code, msg := errCode(body); status != http.StatusBadRequest || code != "invalid_request" || !strings.Contains(msg, "not UTF-8 at byte 26") || !strings.Contains(msg, `"encoding": "base64"`) {
		t.Fatalf("stdin not UTF-8: %d %v, want 400 invalid_request naming the byte and base64", status, body)
	}
}

// TestLoneSurrogateRefused: "\ud800", half a UTF-16 pair, reached the
// command as U+FFFD like a raw byte did; it is refused the same way.
func TestLoneSurrogateRefused(t *testing.T) {
	f := newFixture(t)
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	status, body := f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", `{"command":"cat","stdin":"a\ud800","timeoutMs":5000}`)
	if code, msg := errCode(body); status != http.StatusBadRequest || code != "invalid_request" || !strings.Contains(msg, "half a \\u surrogate pair") {
		t.Fatalf("lone surrogate: %d %v, want 400 invalid_request", status, body)
	}
}
