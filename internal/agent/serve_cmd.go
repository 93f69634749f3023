package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/flaghelp"
	"github.com/hostgate/hostgate/sshlayer"
)

// EnvFlags sets every flag of fs not given on the command line from the
// environment variable HOSTGATE_<NAME> (upper case, '-' → '_'), e.g.
// --state-dir from HOSTGATE_STATE_DIR. Call it after fs.Parse.
func EnvFlags(fs *flag.FlagSet) error { return envFlags(fs, nil) }

// envFlags is EnvFlags, leaving the flags in skip to their defaults too.
func envFlags(fs *flag.FlagSet, skip map[string]bool) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || skip[f.Name] || err != nil {
			return
		}
		name := envName(f.Name)
		if v, ok := os.LookupEnv(name); ok {
			if serr := f.Value.Set(v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, flaghelp.WantFor(f, serr))
			}
		}
	})
	return err
}

// envName is the environment variable of flag name.
func envName(name string) string {
	return "HOSTGATE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// parseFlags parses args into fs, whose output is stderr; the help -h
// asks for goes to help instead (flaghelp).
func parseFlags(fs *flag.FlagSet, args []string, help io.Writer) error {
	return flaghelp.Want(fs, flaghelp.Parse(fs, help, func() error { return fs.Parse(args) }))
}

// envUsage makes fs's -h list each flag's environment variable after the
// flags, as the gateway's commands do.
func envUsage(fs *flag.FlagSet) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage of %s:\n", fs.Name())
		fs.PrintDefaults()
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, "--"+f.Name+" "+envName(f.Name)) })
		fmt.Fprintf(w, "\nthese flags may be set in the environment instead (the flag wins):\n  %s\n", strings.Join(names, "\n  "))
	}
}

// ServeIO is the stdio `agent serve --stdio` uses; nil means this
// process's own (bytestream.Stdio).
type ServeIO struct {
	Conn   net.Conn  // the stream carrying SSH (or yamux with --mux)
	Stderr io.Writer // logs
	Help   io.Writer // the help -h asks for (the command's stdout); nil: Stderr
	// Environ is the environment a keys preamble's InheritEnv passes on
	// (a container's, in a sandbox); nil: this process's.
	Environ []string
}

// RunServe is the `agent serve` command:
//
//	agent serve --listen ADDR (--authorized-keys FILE | --trusted-ca FILE) [--state-dir DIR]
//	agent serve --stdio [--mux] (--authorized-keys FILE | --trusted-ca FILE | --trusted-ca-key KEY)
//
// Every flag is also read from HOSTGATE_* (HOSTGATE_STATE_DIR, …). Logs go
// to stderr only: with --stdio, stdout carries the protocol. It runs until
// ctx ends (SIGTERM), the stdio peer leaves, or the listener fails.
func RunServe(ctx context.Context, args []string, sio *ServeIO) error {
	stderr := io.Writer(os.Stderr)
	if sio != nil && sio.Stderr != nil {
		stderr = sio.Stderr
	}
	var (
		listen, authKeysFile, caFile, caKey, logFormat, logLevel string
		stdio, mux, keysStdin                                    bool
		cfg                                                      ServeConfig
	)
	fs := flag.NewFlagSet("agent serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	envUsage(fs)
	fs.StringVar(&listen, "listen", "", "serve SSH on this TCP address (host:port)")
	fs.BoolVar(&stdio, "stdio", false, "serve one SSH connection over stdin/stdout")
	fs.BoolVar(&mux, "mux", false, "with --stdio: yamux over stdin/stdout, one SSH connection per stream")
	fs.BoolVar(&keysStdin, "keys-stdin", false, "with --stdio: read the host key, trusted CAs and host id from a preamble on stdin (see ReadStdioKeys)")
	fs.StringVar(&authKeysFile, "authorized-keys", "", "file of accepted user public keys (authorized_keys format)")
	fs.StringVar(&caFile, "trusted-ca", "", "file of trusted user certificate authorities (public keys)")
	fs.StringVar(&caKey, "trusted-ca-key", "", "a trusted user CA public key, inline (authorized_keys format)")
	fs.StringVar(&cfg.HostID, "host-id", "", "principal that user certificates must carry (default: the OS user name)")
	fs.StringVar(&cfg.StateDir, "state-dir", DefaultStateDir(), "directory of the host key ("+HostKeyFile+")")
	fs.StringVar(&cfg.HostKeyPath, "host-key", "", "host key file (default STATE_DIR/"+HostKeyFile+"; created when missing)")
	fs.StringVar(&cfg.Shell, "shell", "", "shell that runs commands and interactive sessions (default "+sshlayer.DefaultShell+"; sshd would use the user's login shell)")
	fs.BoolVar(&cfg.NoAgentForwarding, "no-agent-forwarding", false, agentForwardingUsage)
	fs.BoolVar(&cfg.KeepBackground, "keep-background", false, keepBackgroundUsage)
	fs.StringVar(&logFormat, "log-format", "text", "text or json")
	fs.StringVar(&logLevel, "log-level", "", "debug, info, warn or error (default info; warn for --stdio without --mux, whose stderr is usually the ssh user's terminal)")
	var help io.Writer
	if sio != nil {
		help = sio.Help
	}
	if err := parseFlags(fs, args, help); err != nil {
		return err
	}
	if err := envFlags(fs, overriddenModes(fs)); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("agent serve: unexpected arguments %q", fs.Args())
	}
	if err := CheckShell(cfg.Shell); err != nil {
		return fmt.Errorf("agent serve: %w", err)
	}
	if (listen == "") == !stdio {
		return errors.New("agent serve: give exactly one of --listen ADDR and --stdio")
	}
	if mux && !stdio {
		return errors.New("agent serve: --mux needs --stdio")
	}
	if keysStdin && !stdio {
		return errors.New("agent serve: --keys-stdin needs --stdio")
	}
	if keysStdin {
		// The preamble carries the keys and host id; flags that would say
		// otherwise would be read, then silently ignored.
		for _, name := range keysStdinGives {
			if flagSet(fs, name) {
				return fmt.Errorf("agent serve: --%s cannot be used with --keys-stdin (the preamble gives the keys)", name)
			}
		}
	}
	if logLevel == "" {
		logLevel = "info"
		if stdio && !mux {
			logLevel = "warn"
		}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("agent serve: --log-level %q: want debug, info, warn or error", logLevel)
	}
	var h slog.Handler
	switch logFormat {
	case "text":
		h = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})
	case "json":
		h = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})
	default:
		return fmt.Errorf("agent serve: --log-format %q: want text or json", logFormat)
	}
	log := slog.New(h)
	cfg.Logger = log
	logProcs(log)

	if authKeysFile != "" {
		keys, err := LoadKeys(authKeysFile)
		if err != nil {
			return fmt.Errorf("agent serve: --authorized-keys: %w", err)
		}
		cfg.AuthorizedKeys = keys
	}
	if caFile != "" {
		keys, err := LoadKeys(caFile)
		if err != nil {
			return fmt.Errorf("agent serve: --trusted-ca: %w", err)
		}
		cfg.TrustedCAs = keys
	}
	if caKey != "" {
		// ParseKeys, like the files: options (principals=…) refused, not ignored.
		keys, err := ParseKeys([]byte(caKey))
		if err == nil && len(keys) == 0 {
			err = errors.New("no key")
		}
		if err != nil {
			return fmt.Errorf("agent serve: --trusted-ca-key: %w", err)
		}
		cfg.TrustedCAs = append(cfg.TrustedCAs, keys...)
	}
	if len(cfg.AuthorizedKeys) == 0 && len(cfg.TrustedCAs) == 0 && !keysStdin {
		return errors.New("agent serve: no keys: give --authorized-keys FILE, --trusted-ca FILE or --trusted-ca-key KEY (with at least one key)")
	}
	var conn net.Conn
	if stdio {
		reserveThreads(stdioThreads)
		if sio != nil && sio.Conn != nil {
			conn = sio.Conn
		} else {
			conn = bytestream.Stdio()
		}
	}
	if listen != "" && !cfg.KeepBackground {
		// A long-lived server: a guard kills its commands if it is killed.
		// (A stdio agent lives and dies with its one connection's peer.)
		if g := startGuard(log); g != nil {
			defer func() { _ = g.Close() }() // after srv.Close: every group removed
			cfg.Server = g.Configure
		}
	}
	var (
		srv       *sshlayer.Server
		callers   bool // the keys offered caller preambles
		reportPID bool // the keys asked for the pid
		err       error
	)
	if keysStdin {
		environ := os.Environ()
		if sio != nil && sio.Environ != nil {
			environ = sio.Environ
		}
		srv, callers, reportPID, err = stdioKeysServer(conn, environ, log)
	} else {
		srv, err = NewServer(&cfg)
	}
	if err != nil {
		return err
	}
	defer func() { _ = srv.Close() }()

	if listen != "" {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", listen)
		if err != nil {
			return fmt.Errorf("agent serve: --listen: %w", err)
		}
		log.Info("agent serving SSH", "listen", ln.Addr().String())
		return ServeListener(ctx, ln, srv)
	}
	if mux {
		log.Info("agent serving SSH over a multiplexed stdio tunnel")
		t := tunnel{log: log}
		if reportPID {
			// First: the gateway kills this process by it if sandbox
			// code stops it, and no other of its name.
			ack := binary.BigEndian.AppendUint32([]byte(PIDAck), uint32(os.Getpid()))
			if _, err := conn.Write(ack); err != nil {
				return fmt.Errorf("agent serve: %w", err)
			}
		}
		if callers {
			// Before the multiplexer's first byte: the gateway writes
			// caller preambles only once it has read this.
			if _, err := io.WriteString(conn, CallerPreambleAck); err != nil {
				return fmt.Errorf("agent serve: %w", err)
			}
			t.callers = true
		}
		wait, err := serveMux(ctx, conn, srv, nil, t)
		wait()
		return err
	}
	log.Debug("agent serving one SSH connection over stdio")
	return ServeStdio(ctx, conn, srv)
}

// keysStdinGives are the flags whose values a --keys-stdin preamble gives.
var keysStdinGives = []string{"authorized-keys", "trusted-ca", "trusted-ca-key", "host-id", "host-key", "state-dir"}

// overriddenModes are the flags whose environment variables the command
// line overrides by choosing another mode: the flag wins over its
// variable, and over the variables of what it excludes. A sandbox's agent
// runs `serve --stdio --mux --keys-stdin` in the container's environment,
// which holds the provision's env, and a HOSTGATE_LISTEN (or
// HOSTGATE_AUTHORIZED_KEYS naming a missing file) there made it refuse to
// start ("give exactly one of --listen ADDR and --stdio"): the sandbox's
// commands fell back to docker exec, and its SSH, files and forwards
// failed.
func overriddenModes(fs *flag.FlagSet) map[string]bool {
	skip := map[string]bool{}
	if flagSet(fs, "stdio") {
		skip["listen"] = true
	}
	if flagSet(fs, "listen") {
		skip["stdio"], skip["mux"], skip["keys-stdin"] = true, true, true
	}
	if flagSet(fs, "keys-stdin") {
		for _, name := range keysStdinGives {
			skip[name] = true
		}
	}
	return skip
}

// flagSet reports whether name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
