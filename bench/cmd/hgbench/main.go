// Command hgbench runs hostgate side by side with its peers (OpenSSH's ssh
// and sftp against sshd, the docker CLI) in the same run, alternating A/B
// pairs, and writes bench/latest.json and bench/latest.md. scripts/bench
// sets up the peers and runs it; see README's Performance section.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bench"
	"github.com/hostgate/hostgate/client"
)

type config struct {
	gatewayBin, agentBin string
	user                 string
	pairs                int
	bulkMiB, sftpMiB     int
	execN, fwdN          int
	connectN             int
	keptN                int
	fwdWorkers           int
	scaleN               int
	image                string
	out                  string
	only                 map[string]bool
	cpuprofile           string
	agentBefore          string
	gatewayBefore        string
}

// children are what a child hgbench runs instead of the harness, each
// chosen by its environment variable set to "1" (fwdproc.go, layerproc.go, relayproc.go).
var children = []struct {
	env, name string
	run       func() error
}{
	{envFwdChild, "forward child", forwardChild},
	{envLayerChild, "layer child", layerChild},
	{envRelayChild, "relay child", relayChild},
}

// init runs a child before main parses flags meant for the harness.
func init() {
	for _, c := range children {
		if os.Getenv(c.env) != "1" {
			continue
		}
		if err := c.run(); err != nil {
			fmt.Fprintf(os.Stderr, "hgbench %s: %v\n", c.name, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

func main() {
	var c config
	var only string
	flag.StringVar(&c.gatewayBin, "gateway", "", "gateway binary (required)")
	flag.StringVar(&c.agentBin, "agent", "", "static agent binary (required)")
	flag.StringVar(&c.user, "user", "hgbench", "OS user (login shell /bin/sh) that runs OpenSSH's side and the agent")
	flag.IntVar(&c.pairs, "pairs", 6, "A/B pairs per scenario (even: each side runs first in half of them)")
	flag.IntVar(&c.bulkMiB, "bulk-mib", 1024, "bytes streamed to cat >/dev/null per run, MiB")
	flag.IntVar(&c.sftpMiB, "sftp-mib", 256, "SFTP file size, MiB")
	flag.IntVar(&c.execN, "exec-n", 40, "exec round trips per side per pair")
	flag.IntVar(&c.fwdN, "fwd-n", 400, "HTTP requests per side per pair")
	flag.IntVar(&c.connectN, "connect-n", 10, "new connections per side per pair in the connect scenario")
	flag.IntVar(&c.keptN, "kept-n", 2000, "HTTP requests per side per pair on kept-alive connections (fwdkept)")
	flag.IntVar(&c.fwdWorkers, "fwd-workers", 4, "concurrent HTTP clients in the forward scenario (1 measures latency alone)")
	flag.IntVar(&c.scaleN, "scale", 10000, "idle agent tunnels for the scale scenario (0 skips it)")
	flag.StringVar(&c.image, "image", os.Getenv("HOSTGATE_TEST_IMAGE"), "digest-pinned sandbox image; empty skips the Docker scenarios")
	flag.StringVar(&c.out, "out", "bench", "directory for latest.json and latest.md")
	flag.StringVar(&only, "only", "", "comma-separated scenario groups to run ("+strings.Join(groupNames, ",")+"); empty runs all")
	flag.StringVar(&c.cpuprofile, "cpuprofile", "", "write the harness process's CPU profile here (the client side and in-process agents)")
	flag.StringVar(&c.agentBefore, "agent-before", "", "a second agent binary (the code before a change): adds A/B rows (bulk, SFTP download, exec, forward; OpenSSH sftp and ssh -L into agent serve), this agent against it")
	flag.StringVar(&c.gatewayBefore, "gateway-before", "", "a second gateway binary: the A/B rows then run through it (with -agent-before, or this agent), this build's whole path against the before one's; fwdbulk's runs it as ssh's ProxyCommand alone, through this gateway")
	var simTokens, simGateway, simDir, simCA string
	flag.StringVar(&simTokens, "simulate-agents", "", "internal: run as the scale scenario's agent simulator with this token file")
	flag.StringVar(&simGateway, "sim-gateway", "", "internal: the simulator's gateway URL")
	flag.StringVar(&simDir, "sim-dir", "", "internal: the simulator's state directory")
	flag.StringVar(&simCA, "sim-ca", "", "internal: a PEM certificate the simulator's agents trust for the gateway's TLS")
	flag.Parse()
	if simTokens != "" {
		if err := simulateAgents(simGateway, simTokens, simDir, simCA); err != nil {
			fmt.Fprintln(os.Stderr, "hgbench agent simulator:", err)
			os.Exit(1)
		}
		return
	}
	if c.gatewayBin == "" || c.agentBin == "" {
		fmt.Fprintln(os.Stderr, "hgbench: -gateway and -agent are required")
		os.Exit(2)
	}
	if c.fwdWorkers < 1 || c.fwdWorkers > 64 {
		fmt.Fprintln(os.Stderr, "hgbench: -fwd-workers must be 1 to 64")
		os.Exit(2)
	}
	if c.connectN < 1 || c.connectN > 1000 {
		fmt.Fprintln(os.Stderr, "hgbench: -connect-n must be 1 to 1000")
		os.Exit(2)
	}
	if c.keptN < 1 || c.keptN > 100000 {
		fmt.Fprintln(os.Stderr, "hgbench: -kept-n must be 1 to 100000")
		os.Exit(2)
	}
	if only != "" {
		c.only = map[string]bool{}
		for _, s := range strings.Split(only, ",") {
			g := strings.TrimSpace(s)
			if !slices.Contains(groupNames, g) {
				fmt.Fprintf(os.Stderr, "hgbench: -only: no scenario group %q; the groups are %s\n", g, strings.Join(groupNames, ","))
				os.Exit(2)
			}
			c.only[g] = true
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.cpuprofile != "" {
		f, err := os.Create(c.cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			log.Error("cpuprofile", "err", err)
			os.Exit(1)
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	if err := run(ctx, log, &c); err != nil {
		stop()
		pprof.StopCPUProfile()
		log.Error("hgbench failed", "err", err)
		os.Exit(1)
	}
}

// groups are the scenarios in the order they run, each in the group
// -only names it by.
var groups = []struct {
	name string
	fn   func(*env, context.Context) ([]*bench.Scenario, error)
}{
	{"bulk", (*env).bulk},
	{"bulk", (*env).bulkAB},
	{"bulk", (*env).bulkSSHAlone},
	{"sshclient", (*env).bulkOpenSSHClient},
	{"bulk", (*env).bulkLayers},
	{"sftp", (*env).sftp},
	{"exec", (*env).exec},
	{"connect", (*env).connect},
	{"connect", (*env).terminal},
	{"forward", (*env).forward},
	{"fwdkept", (*env).forwardKept},
	{"fwdbulk", (*env).forwardBulk},
	{"sandbox", (*env).sandbox},
	{"scale", (*env).scale},
}

// groupNames are the groups' names, each once, for -only.
var groupNames = func() []string {
	var names []string
	for _, g := range groups {
		if !slices.Contains(names, g.name) {
			names = append(names, g.name)
		}
	}
	return names
}()

func (c *config) want(group string) bool { return c.only == nil || c.only[group] }

// benchHostID is the host id of the bench host's agent.
const benchHostID = "bench"

// env is what every scenario shares: the peers and hostgate's path.
type env struct {
	cfg  *config
	log  *slog.Logger
	dir  string // world-traversable work directory
	uid  int
	gid  int
	home string

	sshd  *sshd
	gw    *gateway
	agent *proc          // the bench host's agent
	host  *hostgate.Host // the bench host through the gateway, connected
	// direct is the bench host over a direct session (agent connect
	// --direct): the client straight to the agent, admitted by the gateway.
	direct *hostgate.Host
	// before is the host served by -agent-before and/or through
	// -gateway-before, when given; abWhat names what the A/B rows compare.
	before *hostgate.Host
	abWhat string
	// gwBefore is -gateway-before's gateway, which serves before.
	gwBefore *gateway
	// beforePids are the gateway and agent processes that serve before.
	beforePids []int
	api        *client.Client // admin
}

func run(ctx context.Context, log *slog.Logger, c *config) error {
	u, err := user.Lookup(c.user)
	if err != nil {
		return fmt.Errorf("user %s (scripts/bench creates it): %w", c.user, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "hgbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	e := &env{cfg: c, log: log, dir: dir, uid: uid, gid: gid, home: u.HomeDir, abWhat: "agent"}

	e.sshd, err = startSSHD(ctx, log, dir, c.user)
	if err != nil {
		return fmt.Errorf("sshd: %w", err)
	}
	defer e.sshd.Close()
	docker := c.image != "" && c.want("sandbox")
	e.gw, err = startGateway(ctx, log, c.gatewayBin, c.agentBin, filepath.Join(dir, "gw"), docker)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	defer e.gw.Stop()
	e.api, err = client.New(e.gw.url, e.gw.admin, nil)
	if err != nil {
		return err
	}
	// The bench host's agent also listens for direct sessions, which only
	// e.direct uses: every other row is about the path through the
	// gateway, so e.host keeps to the relay.
	e.agent, err = e.startAgent(ctx, benchHostID, "--direct", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer e.agent.Stop()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	relayOnly, err := client.New(e.gw.url, e.gw.admin, &client.Options{RelayOnly: true})
	if err != nil {
		cancel()
		return err
	}
	defer relayOnly.CloseIdleConnections()
	e.host, err = relayOnly.Dial(dctx, benchHostID)
	cancel()
	if err != nil {
		return fmt.Errorf("dial bench host: %w", err)
	}
	defer e.host.Close()
	direct, err := client.New(e.gw.url, e.gw.admin, nil)
	if err != nil {
		return err
	}
	defer direct.CloseIdleConnections()
	dctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	e.direct, err = direct.Dial(dctx, benchHostID)
	cancel()
	if err != nil {
		return fmt.Errorf("dial bench host directly: %w", err)
	}
	defer e.direct.Close()
	if addr, err := direct.DirectPath(benchHostID); err != nil || addr == "" {
		return fmt.Errorf("dial bench host directly: the client used the relay (%v)", err)
	}
	if c.agentBefore != "" || c.gatewayBefore != "" {
		gw, api := e.gw, e.api
		if c.gatewayBefore != "" {
			e.abWhat = "build"
			bgw, err := startGateway(ctx, log, c.gatewayBefore, c.agentBin, filepath.Join(dir, "gw-before"), false)
			if err != nil {
				return fmt.Errorf("gateway before: %w", err)
			}
			defer bgw.Stop()
			if api, err = client.New(bgw.url, bgw.admin, nil); err != nil {
				return err
			}
			gw, e.gwBefore = bgw, bgw
		}
		bin := c.agentBefore
		if bin == "" {
			bin = c.agentBin
		}
		bp, err := e.startAgentAt(ctx, gw, api, "before", bin)
		if err != nil {
			return fmt.Errorf("agent before: %w", err)
		}
		defer bp.Stop()
		e.beforePids = []int{gw.Pid(), bp.Pid()}
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		e.before, err = client.Dial(dctx, gw.url, gw.admin, "before")
		cancel()
		if err != nil {
			return fmt.Errorf("dial before host: %w", err)
		}
		defer e.before.Close()
	}

	var results []bench.Result
	add := func(ss ...*bench.Scenario) {
		for _, s := range ss {
			r, err := s.Result()
			if err != nil {
				log.Warn("no result", "scenario", s.Name, "err", err)
				continue
			}
			log.Info("result", "scenario", r.Scenario, "hostgate", r.Hostgate, "peer", r.Peer, "unit", r.Unit, "ratio", r.Ratio)
			results = append(results, r)
		}
	}
	for _, g := range groups {
		if !c.want(g.name) {
			continue
		}
		start := time.Now()
		log.Info("scenario group", "name", g.name)
		ss, err := g.fn(e, ctx)
		add(ss...)
		if err != nil {
			return fmt.Errorf("%s: %w", g.name, err)
		}
		log.Info("scenario group done", "name", g.name, "took", time.Since(start).Round(time.Millisecond))
	}
	return writeResults(c.out, results)
}

func writeResults(dir string, results []bench.Result) error {
	if err := bench.WriteTable(os.Stdout, results); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, write := range map[string]func(io.Writer, []bench.Result) error{
		"latest.json": bench.WriteJSON, "latest.md": bench.WriteTable,
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		err = write(f, results)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}
