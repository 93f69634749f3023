//go:build unix

package sigreset

import (
	"os"
	"os/signal"
	"syscall"
)

// ForChildren keeps the signals this process inherited as ignored (nohup's
// HUP, a background job's INT and QUIT) ignored for the process, but not
// for the commands it starts. A command inherits SIG_IGN across exec, and
// an agent started under nohup ran every command with HUP ignored, so
// Kill(HUP) did nothing and Wait hung; a handler, unlike SIG_IGN, does not
// survive exec. sshd resets these the same way before it runs a user's
// command. Call it once, early in main.
func ForChildren() {
	var sigs []os.Signal
	for _, s := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM,
		syscall.SIGPIPE, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM} {
		if signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	if len(sigs) == 0 {
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		for range ch { // still ignored, by this process
		}
	}()
}
