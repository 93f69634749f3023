// Command gateway is the hostgate gateway: `gateway serve` runs it,
// `gateway token create` and `gateway host reset-key` administer its state
// (also while it runs), and `gateway proxy HOST` is an OpenSSH
// ProxyCommand that reaches a host through it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/hostgate/hostgate/internal/flaghelp"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/sigreset"
)

// command is one subcommand. Subcommands register themselves in init (one
// file each), so others add theirs (e.g. `dev`) without touching this file.
type command struct {
	summary string
	run     func(ctx context.Context, io stdio, args []string) error
}

// stdio is a command's standard streams, injectable for tests.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, io stdio, args []string) error) {
	if _, dup := commands[name]; dup {
		panic("gateway: command registered twice: " + name)
	}
	commands[name] = command{summary: summary, run: run}
}

// errUsage means the command printed its usage; exit 2.
var errUsage = errors.New("usage")

// reportedError is an error the command printed itself, when it had to be
// said before something else happened; exit 1 without printing it again.
type reportedError struct{ error }

func (e reportedError) Unwrap() error { return e.error }

// stopSignals are the signals that end a command cleanly. OpenSSH sends
// SIGHUP to its ProxyCommand as it exits; `gateway proxy` then closes its
// WebSocket, where dying of the signal left the gateway a reset to log as
// a failed relay. `gateway dev` runs in a terminal and drains when it
// hangs up. Neither under nohup; serve logs SIGHUP and goes on
// (ignoreHangups).
func stopSignals(args []string) []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if len(args) > 0 && (args[0] == "proxy" || args[0] == "dev") && !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

func main() {
	sigreset.ForChildren() // the local host's commands get default signals even under nohup
	if len(os.Args) > 1 && (os.Args[1] == "serve" || os.Args[1] == "dev") {
		// A log write to a reader that went away (`gateway serve 2>&1 |
		// logger`, the logger restarted) fails with EPIPE instead:
		// unhandled, the runtime ended the gateway with SIGPIPE for it,
		// every session cut and no drain. Handled, not ignored: commands
		// of dev's local host still start with SIGPIPE at its default.
		// Not for proxy, whose stdout is ssh's pipe: ssh gone, the
		// signal ends it as quietly as ssh expects.
		signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	}
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals(os.Args[1:])...)
	err := run(ctx, stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.Args[1:])
	stop()
	code, say := exitCode(err)
	if say != "" {
		fmt.Fprintln(os.Stderr, say)
	}
	if code != 0 {
		os.Exit(code) // else main returns, as the tests' TestMain needs
	}
}

// exitCode is the exit status for run's err, and what is still to be said
// of it on standard error: 2 for a usage error (an argument missing or
// too many, a flag the command does not take or a flag's bad value), 1
// for a failure.
func exitCode(err error) (int, string) {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp): // help was asked for and given
		return 0, ""
	case errors.As(err, new(usageError)):
		return 2, "gateway: " + err.Error()
	case errors.Is(err, errUsage):
		return 2, ""
	case errors.As(err, new(reportedError)):
		return 1, ""
	}
	return 1, "gateway: " + err.Error()
}

// usageError is a command line the command refused, which its message
// says how (errUsage: its usage printed instead).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// usageErrorf is a usageError of fmt.Errorf's.
func usageErrorf(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

func run(ctx context.Context, sio stdio, args []string) error {
	if len(args) == 0 {
		usage(sio.err)
		return errUsage
	}
	if isHelp(args[0]) {
		usage(sio.out)
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(sio.err, "gateway: unknown command %q\n", args[0])
		usage(sio.err)
		return errUsage
	}
	return c.run(ctx, sio, args[1:])
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "help" }

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: gateway COMMAND [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-18s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nrun `gateway COMMAND -h` for its flags; each may be set as HOSTGATE_<FLAG> in the environment")
}

// newFlags returns a flag set whose errors and usage go to sio.err, and
// whose help, when -h asks for it, to sio.out (parseArgs).
func newFlags(name string, sio stdio) *flag.FlagSet {
	fs := flag.NewFlagSet("gateway "+name, flag.ContinueOnError)
	fs.SetOutput(flagOutput(sio))
	return fs
}

// flagOutput is a flag set's output: standard error, except for help
// asked for, which goes to standard output as `gateway --help` does, so
// that `gateway serve --help | less` pages it.
type flagOutput stdio

func (o flagOutput) Write(p []byte) (int, error) { return o.err.Write(p) }

// envUsage makes fs's usage name the environment variable of each flag
// in envFlags, or of every flag when all is set.
func envUsage(fs *flag.FlagSet, all bool, envFlags ...string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage of %s:\n", fs.Name())
		fs.PrintDefaults()
		var names []string
		fs.VisitAll(func(f *flag.Flag) {
			if all || slices.Contains(envFlags, f.Name) {
				names = append(names, "--"+f.Name+" "+EnvName(f.Name))
			}
		})
		if len(names) > 0 {
			fmt.Fprintf(w, "\nthese flags may be set in the environment instead (the flag wins):\n  %s\n", strings.Join(names, "\n  "))
		}
	}
}

// parse applies HOSTGATE_* environment variables as flag defaults (flag
// --state-dir ↔ HOSTGATE_STATE_DIR), then the command line, which wins.
func parse(fs *flag.FlagSet, args []string) error {
	return parseUsage(fs, args, "")
}

// parseUsage is parse whose -h starts with head, the command's synopsis
// (its positional arguments, which the flags cannot show).
func parseUsage(fs *flag.FlagSet, args []string, head string) error {
	envUsage(fs, true)
	if head != "" {
		flagsUsage := fs.Usage
		fs.Usage = func() {
			fmt.Fprintln(fs.Output(), head)
			flagsUsage()
		}
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := EnvName(f.Name)
		if v, ok := os.LookupEnv(name); ok && err == nil {
			if serr := f.Value.Set(v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, flaghelp.WantFor(f, serr))
			}
		}
	})
	if err != nil {
		return err
	}
	return parseArgs(fs, args)
}

// parseArgs parses flags placed before, between or after positional
// arguments (`host reset-key ID --state-dir D`); fs.Args() then holds the
// positional ones. "--" ends flags.
func parseArgs(fs *flag.FlagSet, args []string) error {
	help := io.Writer(nil)
	if o, ok := fs.Output().(flagOutput); ok {
		help = o.out
	}
	err := flaghelp.Want(fs, flaghelp.Parse(fs, help, func() error { return parseInterspersed(fs, args) }))
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		// A usage error, as a missing argument is: exit 2, not a
		// failure's 1.
		return usageError{err}
	}
	return err
}

// parseInterspersed is parseArgs without the help's routing.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

// EnvName is the environment variable for a flag: HOSTGATE_ and the name
// in upper case with '-' as '_'.
func EnvName(flagName string) string {
	return "HOSTGATE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// defaultStateDir is $XDG_STATE_HOME/hostgate, else ~/.local/state/hostgate,
// else ./hostgate-state.
func defaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "hostgate")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "hostgate")
	}
	return "hostgate-state"
}

// State file names inside --state-dir.
const (
	dbFile    = wire.GatewayStateFile
	caKeyFile = "ca_key"
	lockFile  = "gateway.lock" // held while a gateway serves
)
