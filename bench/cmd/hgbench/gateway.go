package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/internal/store"
)

// proc is a child process; its output is kept (bounded) for errors.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  strings.Builder
	line chan string // lines until the first match is taken; never blocks the reader
}

func startProc(name string, cmd *exec.Cmd) (*proc, error) {
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), line: make(chan string, 64)}
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = mergeAttr(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			if p.out.Len() < 1<<20 {
				p.out.WriteString(sc.Text() + "\n")
			}
			p.mu.Unlock()
			select {
			case p.line <- sc.Text():
			default:
			}
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	go func() {
		_ = cmd.Wait()
		_ = w.Close()
		close(p.done)
	}()
	return p, nil
}

func mergeAttr(a *syscall.SysProcAttr) *syscall.SysProcAttr {
	if a == nil {
		a = &syscall.SysProcAttr{}
	}
	a.Setpgid = true
	return a
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitLine waits for a line matching re.
func (p *proc) waitLine(re *regexp.Regexp, d time.Duration) ([]string, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case l := <-p.line:
			if m := re.FindStringSubmatch(l); m != nil {
				return m, nil
			}
		case <-p.done:
			return nil, fmt.Errorf("%s exited: %s", p.name, p.output())
		case <-t.C:
			return nil, fmt.Errorf("%s: no %v in %v: %w: %s", p.name, re, d, errTimeout, p.output())
		}
	}
}

// Stop sends SIGTERM, then kills the group after 10 s.
func (p *proc) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Pid is the process id (for /proc/PID/status).
func (p *proc) Pid() int { return p.cmd.Process.Pid }

type gateway struct {
	*proc
	url   string
	dir   string
	admin string
	store *store.SQLite
}

var servingRE = regexp.MustCompile(`msg="gateway serving" addr=(\S+)`)

// startGateway runs `gateway serve` on a kernel-chosen loopback port and
// opens its store to mint tokens (10,000 agent tokens through the CLI
// would take minutes).
func startGateway(ctx context.Context, log *slog.Logger, bin, agentBin, dir string, docker bool, extra ...string) (*gateway, error) {
	args := []string{"serve", "--listen", "127.0.0.1:0", "--state-dir", dir, "--docker", "off"}
	if docker {
		// --docker off refuses --agent-binary: nothing would read it.
		args = []string{"serve", "--listen", "127.0.0.1:0", "--state-dir", dir, "--docker", "on", "--agent-binary", agentBin}
	}
	args = append(args, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), procEnv()...)
	p, err := startProc("gateway", cmd)
	if err != nil {
		return nil, err
	}
	m, err := p.waitLine(servingRE, 60*time.Second)
	if err != nil {
		p.Stop()
		return nil, err
	}
	scheme := "http://"
	if slices.Contains(extra, "--tls-cert") {
		scheme = "https://"
	}
	g := &gateway{proc: p, url: scheme + m[1], dir: dir}
	g.store, err = store.Open(ctx, filepath.Join(dir, "gateway.db"))
	if err != nil {
		p.Stop()
		return nil, err
	}
	g.admin, _, err = g.store.CreateToken(ctx, store.TokenSpec{Role: store.RoleAdmin, Name: "hgbench"})
	if err != nil {
		g.Stop()
		return nil, err
	}
	log.Info("gateway up", "url", g.url, "pid", p.Pid(), "docker", docker)
	return g, nil
}

// AgentToken mints an agent token for host id.
func (g *gateway) AgentToken(ctx context.Context, id string) (string, error) {
	tok, _, err := g.store.CreateToken(ctx, store.TokenSpec{Role: store.RoleAgent, Hosts: []string{id}})
	return tok, err
}

func (g *gateway) Stop() {
	g.proc.Stop()
	_ = g.store.Close()
}

// RSS is the gateway's resident set size in bytes (VmRSS).
func (g *gateway) RSS() (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.Pid()))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kib, err := strconv.ParseInt(f[0], 10, 64)
				return kib << 10, err
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", g.Pid())
}

// startAgent runs `agent connect` as the bench user (the same user and
// shell OpenSSH's side runs as) and waits until the gateway shows the host
// connected.
func (e *env) startAgent(ctx context.Context, id string, extra ...string) (*proc, error) {
	return e.startAgentAt(ctx, e.gw, e.api, id, e.cfg.agentBin, extra...)
}

// startAgentAt enrolls the agent at gw, whose admin client is api; extra
// are more flags of agent connect.
func (e *env) startAgentAt(ctx context.Context, gw *gateway, api *client.Client, id, bin string, extra ...string) (*proc, error) {
	tok, err := gw.AgentToken(ctx, id)
	if err != nil {
		return nil, err
	}
	state := filepath.Join(e.dir, "agent-"+id)
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chown(state, e.uid, e.gid); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"connect", "--gateway", gw.url, "--token", tok, "--host-id", id, "--state-dir", state}, extra...)...)
	cmd.Dir = e.home
	cmd.Env = []string{"HOME=" + e.home, "USER=" + e.cfg.user, "LOGNAME=" + e.cfg.user, "PATH=/usr/local/bin:/usr/bin:/bin"}
	cmd.Env = append(cmd.Env, procEnv()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(e.uid), Gid: uint32(e.gid)}}
	p, err := startProc("agent "+id, cmd)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rec, err := api.Host(cctx, id)
		cancel()
		if err == nil && rec.Connected {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("agent %s not connected in 30 s (%v): %s", id, err, p.output())
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("agent %s exited: %s", id, p.output())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// gomaxprocs is GOMAXPROCS for the gateway and agent processes:
// HGBENCH_GOMAXPROCS, else 2 (the machine's cores here).
func gomaxprocs() string {
	if v := os.Getenv("HGBENCH_GOMAXPROCS"); v != "" {
		return v
	}
	return "2"
}

// procEnv is the Go runtime's environment for the processes measured as
// hostgate (gateway, agents): GOMAXPROCS, and GODEBUG from HGBENCH_GODEBUG
// when set (empty otherwise, whatever the harness itself runs with), so a
// runtime setting can be A/B'd on hostgate's processes alone.
func procEnv() []string {
	return []string{"GOMAXPROCS=" + gomaxprocs(), "GODEBUG=" + os.Getenv("HGBENCH_GODEBUG")}
}
