package execapi

import (
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSignalExitKnowsEveryLinuxSignal: an SSH server names the signal that
// killed a command the way the system does (ours: SIGXCPU from ulimit -t as
// "XCPU", SIGXFSZ from ulimit -f, SIGSYS from seccomp), and the runner
// answers 128+N for each of the 31 standard signals, not an error.
func TestSignalExitKnowsEveryLinuxSignal(t *testing.T) {
	for sig := syscall.Signal(1); sig <= 31; sig++ {
		name := strings.TrimPrefix(unix.SignalName(sig), "SIG")
		if code, err := signalExit(name); err != nil || code != 128+int(sig) {
			t.Errorf("%s (%d): %d %v; want %d", name, sig, code, err, 128+int(sig))
		}
	}
	// Other names for the same signals that servers send.
	for name, sig := range map[string]syscall.Signal{"IOT": syscall.SIGABRT, "POLL": syscall.SIGIO, "CLD": syscall.SIGCHLD} {
		if code, err := signalExit(name); err != nil || code != 128+int(sig) {
			t.Errorf("%s: %d %v; want %d", name, code, err, 128+int(sig))
		}
	}
	if _, err := signalExit("SIG@openssh.com"); err == nil || !strings.Contains(err.Error(), "SIG@openssh.com") {
		t.Errorf("a signal sshd cannot name: %v, want an error naming it", err)
	}
}
