package dockerhost

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// PID is the command's pid in its container's pid namespace, as sandbox
// code and KillStopped number it. The engine reports the exec's pid in
// its own pid namespace; the last field of that process's NSpid line in
// /proc/PID/status is its pid in the innermost one, the container's. It
// fails, saying why, when the gateway does not see that process: it runs
// in another pid namespace than the engine's (a container of its own) or
// on another machine, or the process there is no command of a container
// (named otherwise, or in no pid namespace below the gateway's), or the
// command ended or has not started yet.
//
// An agent that does not report its pid (an older agent, or one stopped
// before it did) is told from sandbox code's processes of its name so.
func (s *Stdio) PID(ctx context.Context) (int, error) {
	ins, err := s.runner.api.ContainerExecInspect(ctx, s.execID)
	if err != nil {
		return 0, fmt.Errorf("dockerhost: pid of %s: inspect exec: %w", s.name, err)
	}
	switch {
	case !ins.Running || ins.Pid <= 0:
		return 0, fmt.Errorf("dockerhost: pid of %s: the command is not running (engine pid %d)", s.name, ins.Pid)
	case ins.ContainerID != s.cid:
		return 0, fmt.Errorf("dockerhost: pid of %s: the exec runs in container %.12s, not %.12s", s.name, ins.ContainerID, s.cid)
	}
	b, err := os.ReadFile(filepath.Join(s.proc, strconv.Itoa(ins.Pid), "status"))
	if err != nil {
		return 0, fmt.Errorf("dockerhost: pid of %s: the gateway does not see the engine's process %d (run it in the engine's pid namespace to map pids): %w", s.name, ins.Pid, err)
	}
	name, nspid := statusFields(string(b))
	if strings.HasPrefix(name, "runc:") {
		// The engine reports an exec running from before runc's init
		// has executed the command.
		return 0, fmt.Errorf("dockerhost: pid of %s: the command has not started yet (process %d is still %q)", s.name, ins.Pid, name)
	}
	if name != s.name {
		return 0, fmt.Errorf("dockerhost: pid of %s: the gateway's process %d is %q, not the command (the gateway is in another pid namespace than the engine's)", s.name, ins.Pid, name)
	}
	f := strings.Fields(nspid)
	if len(f) < 2 || f[0] != strconv.Itoa(ins.Pid) {
		return 0, fmt.Errorf("dockerhost: pid of %s: the gateway's process %d is in no container's pid namespace (NSpid %q): the gateway is in another pid namespace than the engine's", s.name, ins.Pid, nspid)
	}
	pid, err := strconv.Atoi(f[len(f)-1])
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("dockerhost: pid of %s: NSpid %q of process %d", s.name, nspid, ins.Pid)
	}
	return pid, nil
}

// statusFields returns the Name and NSpid lines' values of a
// /proc/PID/status.
func statusFields(status string) (name, nspid string) {
	for line := range strings.Lines(status) {
		k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), ":")
		if !ok {
			continue
		}
		switch k {
		case "Name":
			name = strings.TrimSpace(v)
		case "NSpid":
			nspid = strings.TrimSpace(v)
		}
	}
	return name, nspid
}

// commOf is the comm the kernel gives a process that runs file: its base
// name, cut to 15 bytes.
func commOf(file string) string {
	c := path.Base(file)
	if len(c) > 15 {
		c = c[:15]
	}
	return c
}
