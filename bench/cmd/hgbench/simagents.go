package main

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/agent"
)

// The scale scenario's agents run in a child process (hgbench
// -simulate-agents), so the harness's own client, which times the execs,
// does not share a heap and a garbage collector with 10,000 agents.
//
// Protocol on the child's stdin/stdout: the parent writes a total count K;
// the child starts agents until K have a tunnel up and answers "up K". EOF
// on stdin stops every agent and ends the child.

// simulateAgents is the child's side; tokens holds "hostID token" lines.
func simulateAgents(gatewayURL, tokens, dir, caFile string) error {
	raw, err := os.ReadFile(tokens)
	if err != nil {
		return err
	}
	var roots *x509.CertPool
	if caFile != "" {
		pemBytes, err := os.ReadFile(caFile)
		if err != nil {
			return err
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pemBytes) {
			return fmt.Errorf("%s: no PEM certificate", caFile)
		}
	}
	var ids, toks []string
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		id, tok, ok := strings.Cut(l, " ")
		if !ok {
			return fmt.Errorf("bad token line %q", l)
		}
		ids, toks = append(ids, id), append(toks, tok)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	upc := make(chan struct{}, len(ids))
	started, up := 0, 0
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		want, err := strconv.Atoi(strings.TrimSpace(in.Text()))
		if err != nil || want > len(ids) {
			return fmt.Errorf("bad count %q", in.Text())
		}
		for ; started < want; started++ {
			i := started
			// Sharded: one directory of 10,000 entries takes minutes to remove.
			sd := filepath.Join(dir, fmt.Sprint(i/100), fmt.Sprint(i))
			if err := os.MkdirAll(sd, 0o700); err != nil {
				return err
			}
			var once sync.Once
			cfg := &agent.ConnectConfig{GatewayURL: gatewayURL, Token: toks[i], HostID: ids[i], StateDir: sd, RootCAs: roots,
				Info:     hostgate.Info{Kind: "machine", OS: "linux", Home: dir, TempDir: os.TempDir()},
				OnTunnel: func(string) { once.Do(func() { upc <- struct{}{} }) }}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := agent.Connect(ctx, cfg); err != nil {
					fmt.Fprintln(os.Stderr, "agent", i, err)
				}
			}()
		}
		t := time.NewTimer(120 * time.Second)
		for up < want {
			select {
			case <-upc:
				up++
			case <-t.C:
				return fmt.Errorf("%d of %d tunnels up after 120 s", up, want)
			}
		}
		t.Stop()
		fmt.Println("up", up)
	}
	return in.Err()
}

// agentSim is the parent's handle on the child.
type agentSim struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	stop sync.Once
}

func startAgentSim(ctx context.Context, gatewayURL, tokens, dir, caFile string) (*agentSim, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "-simulate-agents", tokens, "-sim-gateway", gatewayURL, "-sim-dir", dir, "-sim-ca", caFile)
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+gomaxprocs())
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &agentSim{cmd: cmd, in: in, out: bufio.NewScanner(out)}, nil
}

// Up asks for k tunnels in total and waits for them.
func (s *agentSim) Up(k int) error {
	if _, err := fmt.Fprintln(s.in, k); err != nil {
		return err
	}
	if !s.out.Scan() {
		return errors.Join(errors.New("agent simulator ended"), s.out.Err())
	}
	if got := s.out.Text(); got != fmt.Sprint("up ", k) {
		return fmt.Errorf("agent simulator said %q", got)
	}
	return nil
}

// scaleBatch is how many tunnels upInBatches asks for at a time.
const scaleBatch = 250

// upInBatches brings the tunnels up to n, scaleBatch more at a time, and
// says how long it took.
func (s *agentSim) upInBatches(n int) (time.Duration, error) {
	t0 := time.Now()
	for k := 1 + scaleBatch; ; k += scaleBatch {
		k = min(k, n)
		if err := s.Up(k); err != nil {
			return 0, err
		}
		if k == n {
			return time.Since(t0).Round(time.Second), nil
		}
	}
}

// Stop closes stdin (every agent stops) and waits; once.
func (s *agentSim) Stop() {
	s.stop.Do(func() {
		_ = s.in.Close()
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
		}
	})
}
