// Command agent runs hostgate's embedded SSH server on a host: `agent
// serve` on a TCP listener or over stdin/stdout, `agent connect` through a
// tunnel it dials out to a gateway.
//
// Serve on a port, for keys listed in a file:
//
//	agent serve --listen 127.0.0.1:2222 --authorized-keys ~/.ssh/authorized_keys
//	ssh -p 2222 localhost
//
// Or let OpenSSH start it per connection, over stdio:
//
//	ssh -o ProxyCommand='agent serve --stdio --authorized-keys KEYS' host
//
// Certificates instead of keys: --trusted-ca FILE (or --trusted-ca-key
// KEY) and --host-id ID, the principal certificates must carry. The host
// key lives in --state-dir (created, 0600, on first start; `ssh-keygen -lf`
// on it prints the fingerprint callers pin). Every flag can also be set as
// HOSTGATE_<FLAG> in the environment. Commands run as the agent's user in
// its own process group, with a minimal environment (the agent's own is
// not passed on) and no file descriptor the agent inherited beyond
// stdin, stdout and stderr; SIGTERM, SIGINT or SIGHUP (unless ignored, as
// under nohup) stops the agent, ending every session
// and killing its processes (`agent connect` logs that it stops and tells the
// gateway, whose log says the agent stopped). Held by its cgroup to one CPU
// or less (a sandbox's default), it runs the Go runtime on one P unless
// GOMAXPROCS says otherwise.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/hostgate/hostgate/internal/agent"
	"github.com/hostgate/hostgate/internal/buildinfo"
	"github.com/hostgate/hostgate/internal/deadline"
	"github.com/hostgate/hostgate/internal/flaghelp"
	"github.com/hostgate/hostgate/internal/sigreset"
)

// commands maps each subcommand to its runner: args after the subcommand
// name, where help and output go (stdout) and where to log (stderr).
var commands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{
	"serve": func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return agent.RunServe(ctx, args, &agent.ServeIO{Stderr: stderr, Help: stdout})
	},
	"connect": agent.RunConnect,
	"version": runVersion,
}

// runVersion prints the version; -h and --help print its usage (they
// printed the version, as any argument did).
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("agent version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: agent version\n\nprints the commit this agent was built from and the Go that built it")
	}
	if err := flaghelp.Parse(fs, stdout, func() error { return fs.Parse(args) }); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("agent version: unexpected arguments %q", fs.Args())
	}
	fmt.Fprintln(stdout, "agent", buildinfo.Version())
	return nil
}

// summaries are the commands' one-line descriptions for usage.
var summaries = map[string]string{
	"connect": "dial out to a gateway and serve this machine's SSH through the tunnel",
	"serve":   "serve SSH on a TCP address (--listen) or over stdin/stdout (--stdio)",
	"version": "print the commit this agent was built from",
}

func usage(w io.Writer) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: agent COMMAND [flags]\n\ncommands:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, summaries[n])
	}
	fmt.Fprintln(w, "\nrun `agent COMMAND -h` for its flags; each may be set as HOSTGATE_<FLAG> in the environment")
}

func main() {
	// Exits when this process is a sandbox's deadline, its PID 1.
	deadline.MaybeRun()
	if err := agent.HideInheritedFDs(); err != nil { // commands get fds 0-2 only, as under sshd
		fmt.Fprintf(os.Stderr, "agent: warning: commands may inherit this process's file descriptors: %v\n", err)
	}
	agent.MaybeRunGuard() // exits when this process is an agent's guard
	// Read before sigreset handles the signals ignored at start: under
	// nohup, SIGHUP stays ignored.
	if !signal.Ignored(syscall.SIGHUP) {
		stopSignals = append(stopSignals, syscall.SIGHUP)
	}
	sigreset.ForChildren() // commands get default signals even under nohup
	// A log write to a reader that went away (a pipe to a logger that
	// was restarted) fails with EPIPE instead: unhandled, the runtime
	// ended the agent with SIGPIPE for it, its sessions cut and its
	// cleanup not run. Handled, not ignored: commands still start with
	// SIGPIPE at its default.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	agent.FitProcs() // one P under a limit of one CPU
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// stopSignals stop the agent cleanly; main adds SIGHUP unless the agent
// started with it ignored (nohup). OpenSSH sends SIGHUP to its
// ProxyCommand as it exits, a `~.` or a killed ssh included, and a
// terminal's close sends it to `agent connect` run there: by the runtime's
// default it ended the agent at once, its sessions' commands left running
// (a stdio agent has no guard), and the gateway not told.
var stopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	cmd, ok := commands[args[0]]
	if !ok {
		if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			usage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "agent: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	// The stop signals end the command cleanly: servers close, child
	// process groups are killed and awaited.
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	defer stop()
	if err := cmd(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if msg := err.Error(); strings.HasPrefix(msg, "agent ") {
			fmt.Fprintln(stderr, msg) // the command named itself
		} else {
			fmt.Fprintf(stderr, "agent %s: %s\n", args[0], msg)
		}
		return 1
	}
	return 0
}
