package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/tlshint"
	"github.com/hostgate/hostgate/sshlayer"
)

// DefaultStateDir is where the agent keeps its host key and the pinned
// gateway CA: $XDG_STATE_HOME/hostgate-agent, else
// ~/.local/state/hostgate-agent.
func DefaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "hostgate-agent")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "hostgate-agent")
	}
	return "hostgate-agent-state"
}

// agentForwardingUsage is --no-agent-forwarding's help, the same for
// connect and serve.
const agentForwardingUsage = "refuse ssh -A: commands get no SSH_AUTH_SOCK (sshd's AllowAgentForwarding no); without it a caller whose key or certificate permits agent forwarding may forward its agent"

// keepBackgroundUsage is --keep-background's help, the same for connect
// and serve.
const keepBackgroundUsage = "let what a command starts in the background (cmd &, nohup) outlive the command and its connection, as under sshd (VS Code Remote-SSH's server expects it); without it a session's end kills all it started"

// RunConnect is the `agent connect` command: `agent connect --gateway URL
// --token T [--host-id ID] [--state-dir DIR] [--max-backoff D]
// [--no-agent-forwarding] [--keep-background] [--direct ADDR
// [--direct-advertise HOST:PORT,…]]`, each flag also read from
// HOSTGATE_GATEWAY, HOSTGATE_TOKEN, HOSTGATE_HOST_ID, HOSTGATE_STATE_DIR,
// HOSTGATE_MAX_BACKOFF, HOSTGATE_NO_AGENT_FORWARDING, … (the environment keeps
// the token out of ps). It runs until ctx ends
// (SIGTERM) and logs to stderr; the help -h asks for goes to stdout.
func RunConnect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg       ConnectConfig
		logFormat string
		logLevel  string
		caFile    string
	)
	fs := flag.NewFlagSet("agent connect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.GatewayURL, "gateway", "", "gateway URL: http(s):// or ws(s)://")
	fs.StringVar(&caFile, "ca-file", "", "PEM `FILE` of a CA to trust for the gateway's TLS certificate beside the system's: a private CA, or the gateway's self-signed certificate")
	fs.StringVar(&cfg.Token, "token", "", "agent token (prefer HOSTGATE_TOKEN)")
	fs.StringVar(&cfg.HostID, "host-id", "", "host id to enroll as (default: the one host the token names; when given, it must be that one)")
	fs.StringVar(&cfg.StateDir, "state-dir", DefaultStateDir(), "directory for the host key and the pinned gateway CA")
	fs.StringVar(&cfg.Shell, "shell", "", "shell that runs commands and interactive sessions (default "+sshlayer.DefaultShell+"; sshd would use the user's login shell)")
	fs.BoolVar(&cfg.NoAgentForwarding, "no-agent-forwarding", false, agentForwardingUsage)
	fs.BoolVar(&cfg.KeepBackground, "keep-background", false, keepBackgroundUsage)
	fs.StringVar(&cfg.Direct, "direct", "", "listen `ADDR` (:2222, 10.0.0.5:2222) for direct sessions: callers that reach it run their SSH sessions here instead of through the gateway's relay, the gateway admitting each; callers that cannot use the relay")
	fs.StringVar(&cfg.DirectAdvertise, "direct-advertise", "", "`HOST:PORT[,HOST:PORT…]` callers reach --direct's listener at (a NAT's forwarded port, a DNS name); default --direct's address when its host is specific, else this machine's addresses but loopback and link-local")
	fs.StringVar(&logFormat, "log-format", "text", "text or json")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&cfg.MaxBackoff, "max-backoff", DefaultMaxBackoff, "the longest wait between attempts to connect; a refused agent (bad token, another host key) waits between half of it and all of it")
	envUsage(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if err := EnvFlags(fs); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("agent connect: unexpected arguments %q", fs.Args())
	}
	if cfg.MaxBackoff <= 0 {
		return fmt.Errorf("agent connect: --max-backoff %v: want a positive duration, such as %v", cfg.MaxBackoff, DefaultMaxBackoff)
	}
	if err := CheckShell(cfg.Shell); err != nil {
		return fmt.Errorf("agent connect: %w", err)
	}
	if cfg.DirectAdvertise != "" && cfg.Direct == "" {
		return errors.New("agent connect: --direct-advertise (HOSTGATE_DIRECT_ADVERTISE) needs --direct ADDR (HOSTGATE_DIRECT), the listener it advertises")
	}
	if cfg.DirectAdvertise != "" {
		if _, err := wire.ParseDirectAddrs(cfg.DirectAdvertise); err != nil {
			return fmt.Errorf("agent connect: --direct-advertise: %w", err)
		}
	}
	if cfg.GatewayURL == "" || cfg.Token == "" {
		return errors.New("agent connect: --gateway and --token (or HOSTGATE_GATEWAY, HOSTGATE_TOKEN) are required")
	}
	if caFile != "" {
		pool, err := tlshint.CAFile(caFile)
		if err != nil {
			return fmt.Errorf("agent connect: %w", err)
		}
		cfg.RootCAs = pool
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("agent connect: --log-level %q: want debug, info, warn or error", logLevel)
	}
	var h slog.Handler
	switch logFormat {
	case "text":
		h = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})
	case "json":
		h = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})
	default:
		return fmt.Errorf("agent connect: --log-format %q: want text or json", logFormat)
	}
	cfg.Logger = slog.New(h)
	logProcs(cfg.Logger)
	// One guard for the agent's life: each tunnel's server reports to it.
	// With --keep-background a killed agent leaves its commands as a
	// killed sshd does: their pipes end, nothing is killed.
	if cfg.KeepBackground {
		return Connect(ctx, &cfg)
	}
	if g := startGuard(cfg.Logger); g != nil {
		defer func() { _ = g.Close() }() // after Connect closed its servers
		cfg.Server = g.Configure
	}
	return Connect(ctx, &cfg)
}
