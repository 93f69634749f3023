//go:build unix

package sshlayer

import (
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// srvSignals maps RFC 4254 §6.10 signal names (without "SIG") to signals.
var srvSignals = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE,
	"HUP": syscall.SIGHUP, "ILL": syscall.SIGILL, "INT": syscall.SIGINT,
	"KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE, "QUIT": syscall.SIGQUIT,
	"SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
	// Not in the RFC's list, but sent by OpenSSH clients and useful.
	"CONT": syscall.SIGCONT, "STOP": syscall.SIGSTOP, "TSTP": syscall.SIGTSTP,
	"WINCH": syscall.SIGWINCH, "BUS": syscall.SIGBUS, "TRAP": syscall.SIGTRAP,
}

func signalByName(name string) (syscall.Signal, bool) {
	s, ok := srvSignals[name]
	return s, ok
}

// signalName returns the RFC name of sig, or "" when it has none.
func signalName(sig syscall.Signal) string {
	for n, s := range srvSignals {
		if s == sig {
			return n
		}
	}
	return ""
}

// otherSignalName names a signal srvSignals lacks for exit-signal: the
// system's name without "SIG" (XCPU, SYS), else sshd's name for a signal
// it cannot name (a real-time one).
func otherSignalName(sig syscall.Signal) string {
	if n, ok := strings.CutPrefix(unix.SignalName(sig), "SIG"); ok {
		return n
	}
	return "SIG@openssh.com"
}
