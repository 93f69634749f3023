//go:build unix

package agent

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// HideInheritedFDs marks every file descriptor above 2 close-on-exec, so
// that the commands the agent starts get stdin, stdout and stderr and
// nothing else of what the agent inherited, as under sshd, which closes
// the rest. Go opens its own descriptors close-on-exec but leaves inherited
// ones as they came: an agent started with a supervisor's pipe or a file
// open (a job runner's, `exec 7>file`) handed it to every command, whose
// background children then held the pipe open (its reader never saw EOF)
// or could write to the file. The agent uses no inherited descriptor
// beyond 2, and descriptors passed on on purpose (os/exec's ExtraFiles)
// still are. main calls it first, before the process has other threads
// that could start a command.
func HideInheritedFDs() error {
	if cloexecAbove2() {
		return nil
	}
	return cloexecListed()
}

// cloexecListed is HideInheritedFDs' way where close_range is not there:
// mark each descriptor the system lists for this process.
func cloexecListed() error {
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		return fmt.Errorf("agent: list inherited file descriptors: %w", err)
	}
	for _, e := range ents {
		// The listing's own descriptor is among them; it is closed by
		// now, and fcntl on it fails harmlessly.
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}
