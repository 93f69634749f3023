//go:build unix

package sshlayer

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// drainGrace bounds how long output is awaited after the process group is
// gone: a descendant that escaped the group (setsid) may hold the pipes
// open forever.
const drainGrace = 2 * time.Second

// groupGrace bounds the wait for SIGKILLed group members to terminate (a
// process in uninterruptible sleep may take a while).
const groupGrace = 5 * time.Second

// srvProcess is one command of a session, in a session and process group
// of its own. Its goroutines (stdin copy, output copies, the
// waiter) are started by run and waited for by wait.
//
// Order on exit (RFC 4254 §6.10): the leader exits; the rest of its group
// is killed, and the rest of its session (unless LeaveBackground or
// KeepBackground); output is drained; exit-status or exit-signal is sent; then
// EOF and close.
type srvProcess struct {
	s    *session
	cmd  *exec.Cmd
	pgid int
	// mark is where pid allocation stood before the start: killSession
	// tells from it whether pid numbers may have wrapped past the leader's.
	mark pidMark

	ptmx    *os.File // PTY master; nil without a PTY
	stdin   *os.File // write end of the child's stdin; nil with a PTY
	outputs []*os.File

	wg     sync.WaitGroup
	exited chan struct{} // closed once the leader has exited (maybe not reaped)

	mu     sync.Mutex // guards reaped and closed; held while signalling the group
	reaped bool       // after this the pgid may belong to someone else
	closed bool       // outputs (and the PTY master) closed

	wake outputWake // the waiter's cut of the copies' waits at drainGrace

	// notice goes to the client's stderr (the terminal, with one) before
	// the command's output: why it runs in "/" (workDir).
	notice string
}

// startProcess starts cmd (or a login shell when cmd is "") for s: as
// `Shell -c cmd`, or, for a line hostgate's client wrote, by doing what the
// shell would (directCommand) when the shell is dash.
func startProcess(s *session, cmd string) (*srvProcess, error) {
	cfg := &s.c.srv.cfg
	env := append(append([]string(nil), s.c.srv.env...), s.env...)
	env = append(env, connectionEnv(s.c.sc.RemoteAddr(), s.c.sc.LocalAddr())...)
	if s.agent != nil {
		// After the client's env: a SendEnv'd SSH_AUTH_SOCK names a
		// socket of the client's machine, not this one.
		env = append(env, "SSH_AUTH_SOCK="+s.agent.path)
	}
	if cmd != "" && s.pty == nil && s.c.srv.dash && !cfg.AlwaysShell {
		if d, ok := directCommand(cmd, cfg.Dir, env); ok {
			c := &exec.Cmd{Path: d.path, Args: d.argv, Dir: d.dir, Env: d.env}
			if p, err := launchProcess(s, c); err == nil {
				s.c.srv.directStarts.Add(1)
				return p, nil
			}
			// Not executable after all (ENOEXEC: a script without #!),
			// or gone: the shell does it and says what went wrong.
		}
	}
	shellIn := func(dir string) *exec.Cmd {
		c := &exec.Cmd{Path: cfg.Shell, Dir: dir, Env: env}
		if cmd == "" {
			c.Args = []string{"-" + filepath.Base(cfg.Shell)} // a login shell, as sshd starts it
		} else {
			c.Args = []string{filepath.Base(cfg.Shell), "-c", cmd}
		}
		return c
	}
	p, err := launchProcess(s, shellIn(cfg.Dir))
	if err != nil {
		// Checked only once a start failed: a start that works (every
		// one, on a host whose home is there) pays nothing for it.
		if dir, notice := workDir(cfg.Dir); dir != cfg.Dir {
			if p, err = launchProcess(s, shellIn(dir)); err == nil {
				p.notice = notice
			}
		}
	}
	return p, err
}

// workDir is the directory a session starts in: home (ServerConfig.Dir),
// or "/" when home cannot be entered, with the notice sshd prints then
// (on the session's stderr, as here). A machine agent run as a system
// user without a home directory (useradd -r makes none), or whose home
// was removed, refused every command ("exec request failed on channel
// 0": the fork's chdir failed, and Go named the shell, "fork/exec
// /bin/sh: no such file or directory") and every SFTP session (OpenSSH's
// sftp: "Need cwd"), where sshd runs them in "/".
func workDir(home string) (dir, notice string) {
	err := canEnter(home)
	if err == nil || home == "/" {
		return home, ""
	}
	why := err.Error()
	var errno syscall.Errno
	if errors.As(err, &errno) {
		why = capitalize(errno.Error()) // as strerror writes it
	}
	return "/", fmt.Sprintf("Could not chdir to home directory %s: %s\n", home, why)
}

// canEnter reports why dir could not be a command's working directory:
// not there, not a directory, or not searchable (chdir's errors).
func canEnter(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &os.PathError{Op: "chdir", Path: dir, Err: syscall.ENOTDIR}
	}
	if err := unix.Access(dir, unix.X_OK); err != nil {
		return &os.PathError{Op: "chdir", Path: dir, Err: err}
	}
	return nil
}

// launchProcess starts c for s in its own process group (its own session
// with a PTY), with pipes or the PTY as its stdio.
func launchProcess(s *session, c *exec.Cmd) (*srvProcess, error) {
	p := &srvProcess{s: s, cmd: c, exited: make(chan struct{}), mark: markPIDs()}
	var adjSet bool // oom_score_adj set at its exec
	if s.pty != nil {
		c.Env = append(c.Env, "TERM="+s.pty.Term)
		ptmx, tty, err := openPTY()
		if err != nil {
			return nil, fmt.Errorf("open pty: %w", err)
		}
		if err := applyTTYModes(tty, s.pty.Modes); err != nil {
			_ = ptmx.Close()
			_ = tty.Close()
			return nil, fmt.Errorf("pty modes: %w", err)
		}
		if err := setWinsize(ptmx, s.pty.Cols, s.pty.Rows); err != nil {
			_ = ptmx.Close()
			_ = tty.Close()
			return nil, fmt.Errorf("pty size: %w", err)
		}
		c.Env = append(c.Env, "SSH_TTY="+tty.Name())
		c.Stdin, c.Stdout, c.Stderr = tty, tty, tty
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		adjSet, err = s.c.srv.startCommand(c)
		_ = tty.Close()
		if err != nil {
			_ = ptmx.Close()
			return nil, fmt.Errorf("start: %w", err)
		}
		p.ptmx = ptmx
		p.outputs = []*os.File{ptmx}
	} else {
		var files []*os.File // every pipe end, closed on failure
		pipe := func() (r, w *os.File, err error) {
			r, w, err = os.Pipe()
			if err == nil {
				files = append(files, r, w)
			}
			return
		}
		closeAll := func() {
			for _, f := range files {
				_ = f.Close()
			}
		}
		inR, inW, err1 := pipe()
		outR, outW, err2 := pipe()
		errR, errW, err3 := pipe()
		if err := errors.Join(err1, err2, err3); err != nil {
			closeAll()
			return nil, fmt.Errorf("pipes: %w", err)
		}
		c.Stdin, c.Stdout, c.Stderr = inR, outW, errW
		// A session of its own, as sshd gives a command without a
		// terminal: a shell with job control on (`set -m`) puts each
		// background job in a group of its own, which the group kill
		// misses, but not in a session of its own. It also keeps the
		// agent's controlling terminal, if it has one, from the command.
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		var err error
		adjSet, err = s.c.srv.startCommand(c)
		// The child has its own copies; ours would keep the pipes open.
		_ = inR.Close()
		_ = outW.Close()
		_ = errW.Close()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("start: %w", err)
		}
		p.stdin = inW
		p.outputs = []*os.File{outR, errR}
	}
	p.pgid = c.Process.Pid // Setsid: the leader's pid is the group and session id
	if adj := s.c.srv.cfg.ChildOOMScoreAdj; adj > 0 && !adjSet {
		// Not set at its exec (startWithOOMScoreAdj): after the start,
		// so the command and what it forks first may run without it.
		if err := setOOMScoreAdj(p.pgid, min(adj, 1000)); err != nil {
			s.c.srv.log.Debug("oom_score_adj", "pid", p.pgid, "err", err)
		}
	}
	if track := s.c.srv.cfg.ProcessGroups; track != nil {
		track(p.pgid, true)
	}
	return p, nil
}

// startCommand starts c, held to cfg.ChildTasks when set: refused as a
// fork past the limit is (EAGAIN) while the count is at its Max, and
// forked with the limit, which it inherits. With cfg.ChildOOMScoreAdj,
// c has it from its first instruction where it can (adjSet).
func (srv *Server) startCommand(c *exec.Cmd) (adjSet bool, err error) {
	start := func() error { return c.Start() }
	if adj := min(srv.cfg.ChildOOMScoreAdj, 1000); adj > 0 {
		start = func() (err error) {
			adjSet, err = startWithOOMScoreAdj(c, adj, srv.log)
			return err
		}
	}
	lim := srv.cfg.ChildTasks
	if lim == nil {
		return adjSet, start()
	}
	// One at a time: each start's count sees the ones before it, and
	// the lowered limit is the process's, not this goroutine's.
	srv.startMu.Lock()
	defer srv.startMu.Unlock()
	if lim.Count != nil {
		n, err := lim.Count()
		if err == nil && n >= lim.Max {
			// What the shell would have got from fork, which the
			// gateway and ssh report as the limit being spent.
			return false, &os.PathError{Op: "fork/exec", Path: c.Path, Err: syscall.EAGAIN}
		}
		if err != nil {
			srv.log.Debug("command tasks: count", "err", err)
		}
	}
	err = withMaxTasks(lim.Max, start, srv.log)
	return adjSet, err
}

// run starts the copies and the waiter.
func (p *srvProcess) run() {
	ch := p.s.ch
	var outWG sync.WaitGroup
	copyOut := func(dst io.Writer, src *os.File, notice string) {
		defer outWG.Done()
		defer p.wg.Done()
		if notice != "" {
			// Written here, not on the session's goroutine, which a
			// client that gives no window would hold.
			_, _ = io.WriteString(dst, notice)
		}
		// A terminal's output is not coalesced: a wait would delay
		// every screen update, and its big reads are rare.
		wait := p.s.c.srv.coalesceWait
		if p.ptmx != nil {
			wait = 0
		}
		copyOutput(dst, src, wait, &p.wake)
	}
	outWG.Add(len(p.outputs))
	p.wg.Add(len(p.outputs) + 2)
	if p.ptmx != nil {
		go copyOut(ch, p.ptmx, strings.ReplaceAll(p.notice, "\n", "\r\n"))
	} else {
		go copyOut(ch, p.outputs[0], "")
		go copyOut(ch.Stderr(), p.outputs[1], p.notice)
	}
	go func() {
		defer p.wg.Done()
		if p.ptmx != nil {
			// Client EOF on a terminal has no meaning; ^D is in-band.
			_, _ = io.Copy(p.ptmx, ch)
			return
		}
		copyInput(p.stdin, ch)
		_ = p.stdin.Close()
	}()
	go func() {
		defer p.wg.Done()
		st := p.reap()
		// Everything that could write is gone; let the copies finish, but
		// not forever (see drainGrace).
		drained := make(chan struct{})
		go func() { outWG.Wait(); close(drained) }()
		t := time.NewTimer(p.s.c.srv.drainGrace)
		select {
		case <-drained:
		case <-t.C:
			// Wake the copies: each then takes what the pipe still holds
			// without waiting for an EOF that may never come. Closing the
			// pipe instead would drop that tail when a copy is busy
			// writing to a slow client.
			p.wake.now(p.outputs)
			<-drained
		}
		t.Stop()
		p.mu.Lock()
		p.closed = true // resize must not touch a closed master
		for _, f := range p.outputs {
			_ = f.Close()
		}
		p.mu.Unlock()
		if p.stdin != nil {
			_ = p.stdin.Close()
		}
		p.sendExit(st)
		_ = ch.CloseWrite()
		_ = ch.Close()
	}()
}

// inputBuf is the read size from the channel into the child's stdin. The
// SSH channel's Read returns every queued packet that fits and sends one
// window adjust per Read, so a buffer of several 32 KiB packets means
// fewer wakeups, write syscalls and window-adjust messages than io.Copy's
// 32 KiB (measured with scripts/bench, issue 7).
const inputBuf = 256 << 10

// Copy buffers come from pools: a fresh 256 KiB input buffer and two
// 32 KiB output buffers were 320 KiB allocated and zeroed per command,
// most of an exec round trip's garbage.
var (
	inputBufs  = sync.Pool{New: func() any { b := make([]byte, inputBuf); return &b }}
	outputBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
)

// copyInput copies the channel into the child's stdin until EOF or a
// failed write. It does not use io.Copy: *os.File's ReadFrom would copy
// through its own 32 KiB buffer.
func copyInput(dst *os.File, src io.Reader) {
	bp := inputBufs.Get().(*[]byte)
	defer inputBufs.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// coalesceMin and coalesceWait: a read of at least coalesceMin bytes
// that leaves the buffer partly empty is taken for a bulk writer's write
// (head's 4 KiB writes, stdio's flush of a full buffer), and the copy
// reads on until the buffer is full or coalesceWait passes without it
// filling. Without the wait, a copy that outran its writer, as it does
// whenever the writer gets less CPU than the agent (a loaded machine, a
// throttled sandbox), sent each 4 KiB write as an SSH packet of its own,
// and every hop after it paid per packet again: a yamux frame, a
// WebSocket message, the gateway's relay, the client's decryption and
// their goroutine wake-ups. From `head -c` at load 15 the agent made
// 131-164 reads per MiB, against 44 on a quiet machine (issue 7). Smaller
// reads, such as a shell's prompt or a line of log, are sent at once.
const (
	coalesceMin  = 4 << 10
	coalesceWait = 500 * time.Microsecond
)

// outputWake lets the waiter end the copies' reads at drainGrace with a
// deadline of now that a copy's own coalescing deadline must not undo.
type outputWake struct {
	mu    sync.Mutex
	woken bool
}

// now wakes every copy reading from outputs; a copy that cannot take a
// deadline is woken by closing its file instead.
func (w *outputWake) now(outputs []*os.File) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.woken = true
	for _, f := range outputs {
		if f.SetReadDeadline(time.Now()) != nil {
			_ = f.Close()
		}
	}
}

// setDeadline sets src's read deadline to t unless the waiter woke the
// copies; it reports whether it did.
func (w *outputWake) setDeadline(src *os.File, t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.woken && src.SetReadDeadline(t) == nil
}

// copyOutput copies a command's output to the channel until EOF (EIO for
// a PTY master), a failed write, or the waiter's wake; after the wake it
// copies what is left in the pipe without waiting for more. With wait > 0
// it coalesces a bulk writer's writes (see coalesceMin).
func copyOutput(dst io.Writer, src *os.File, wait time.Duration, w *outputWake) {
	bp := outputBufs.Get().(*[]byte)
	defer outputBufs.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if wait > 0 && err == nil && n >= coalesceMin && n < len(buf) {
			n, err = fillOutput(src, buf, n, wait, w)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			drainOutput(dst, src, buf)
			return
		}
		if err != nil {
			return
		}
	}
}

// fillOutput reads on into buf[n:] until buf is full or wait passes
// without it filling, and returns buf's new length. An error other than
// its own deadline's (EOF, the waiter's wake) is returned with the bytes
// read before it.
func fillOutput(src *os.File, buf []byte, n int, wait time.Duration, w *outputWake) (int, error) {
	if !w.setDeadline(src, time.Now().Add(wait)) {
		return n, nil // woken (the next read says so), or no deadlines
	}
	var err error
	for n < len(buf) && err == nil {
		var m int
		m, err = src.Read(buf[n:])
		n += m
	}
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return n, err
	}
	// Ours, or the waiter's: setDeadline leaves the waiter's in place, and
	// the next read returns it.
	w.setDeadline(src, time.Time{})
	return n, nil
}

// maxDrain bounds what drainOutput copies: a pipe holds 64 KiB by default,
// so more means an escaped process is still writing.
const maxDrain = 1 << 20

// drainOutput copies the bytes src holds right now, with non-blocking
// reads that stop at the first empty one (or after maxDrain bytes).
func drainOutput(dst io.Writer, src *os.File, buf []byte) {
	// The deadline that woke the copy would fail the raw reads too; the
	// reads below never wait, so clearing it is safe.
	_ = src.SetReadDeadline(time.Time{})
	rc, err := src.SyscallConn()
	if err != nil {
		return
	}
	for total := 0; total < maxDrain; {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, rerr = unix.Read(int(fd), buf)
			return true // one attempt: never wait
		}); err != nil || rerr != nil || n <= 0 {
			return
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
		total += n
	}
}

// reap waits for the leader to exit, kills what is left of its group
// while the zombie leader still holds the group id, then reaps it.
func (p *srvProcess) reap() syscall.WaitStatus {
	waitExited(p.cmd.Process.Pid)
	close(p.exited)
	p.mu.Lock()
	if cfg := &p.s.c.srv.cfg; !cfg.LeaveBackground && !cfg.KeepBackground {
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		// The session holds the group, and the jobs of a shell with job
		// control, each in a group of its own; awaited too.
		killSession(p.pgid, p.cmd.Process.Pid, p.mark, groupGrace)
	}
	if track := p.s.c.srv.cfg.ProcessGroups; track != nil {
		track(p.pgid, false)
	}
	_ = p.cmd.Wait()
	p.reaped = true
	p.mu.Unlock()
	st, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return st
}

func (p *srvProcess) sendExit(st syscall.WaitStatus) {
	ch := p.s.ch
	if st.Signaled() {
		name := signalName(st.Signal())
		if name == "" && isHostgate(p.s.c.sc.ClientVersion()) {
			// A signal without an RFC name, to hostgate's client: the
			// way shells report it, which the gateway's executions
			// (execapi's linuxSignals) and Host.Exec have always been
			// given, older gateways knowing no more names.
			_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(128 + st.Signal())}))
			return
		}
		if name == "" {
			// Any other client is told the command was killed, as sshd
			// tells it: OpenSSH's ssh exits 255, not 128+N as for a
			// command that exited so.
			name = otherSignalName(st.Signal())
		}
		_, _ = ch.SendRequest("exit-signal", false, ssh.Marshal(struct {
			Signal     string
			CoreDumped bool
			Msg, Lang  string
		}{name, st.CoreDump(), "", ""}))
		return
	}
	_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(st.ExitStatus())}))
}

// signal sends sig to the whole process group, unless it is gone.
func (p *srvProcess) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return errors.New("process has exited")
	}
	return syscall.Kill(-p.pgid, sig)
}

// terminate ends the process group because its channel or connection is
// gone. A command without a terminal first gets what sshd gives it: its
// stdin ends and its output pipes close (a write fails with EPIPE), and it
// has the grace period to finish on its own; a program that cleans up on
// EOF (rsync --partial keeping what it received, git releasing its lock)
// does so. Then, as with a terminal from the start, SIGHUP (what a
// vanished terminal sends), then SIGKILL after the grace period. With
// KeepBackground the SIGKILL, and without a terminal the SIGHUP too, goes
// to the command alone, not its group.
func (p *srvProcess) terminate() {
	select {
	case <-p.exited:
		return
	default:
	}
	grace := p.s.c.srv.cfg.KillGrace
	t := time.NewTimer(grace)
	defer t.Stop()
	if p.ptmx == nil {
		p.hangUpPipes()
		select {
		case <-p.exited:
			return
		case <-t.C:
		}
		t.Reset(grace)
	}
	keep := p.s.c.srv.cfg.KeepBackground
	if keep && p.ptmx == nil {
		// sshd signals nothing without a terminal. The command alone
		// is signalled, so that the session's wait for it is bounded;
		// what it started in the background is left alone.
		_ = p.signalLeader(syscall.SIGHUP)
	} else {
		_ = p.signal(syscall.SIGHUP)
	}
	select {
	case <-p.exited:
	case <-t.C:
		if keep {
			_ = p.signalLeader(syscall.SIGKILL)
		} else {
			_ = p.signal(syscall.SIGKILL)
		}
	}
}

// signalLeader sends sig to the command alone, not its group, unless it
// is gone.
func (p *srvProcess) signalLeader(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return errors.New("process has exited")
	}
	return syscall.Kill(p.cmd.Process.Pid, sig)
}

// hangUpPipes closes this side of a command's stdin and output pipes, as
// sshd does when the client goes: the command reads EOF, and a write gets
// EPIPE (SIGPIPE). The copies that use them end with an error.
func (p *srvProcess) hangUpPipes() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	if p.stdin != nil {
		_ = p.stdin.Close()
	}
	for _, f := range p.outputs {
		_ = f.Close()
	}
}

// endOutput closes this side of a command's stdout pipe, as sshd does on
// eow@openssh.com: the client can no longer write what it is sent (ssh
// whose stdout reader went, `ssh host yes | head -1`), so the command's
// next write gets EPIPE (SIGPIPE) instead of running on for ever into a
// client that drops it. Stderr stays: the client still shows it. A
// terminal has one stream for both, and is left alone, as by sshd.
func (p *srvProcess) endOutput() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.ptmx != nil || len(p.outputs) == 0 {
		return false
	}
	// The copy reading it returns at once (os.ErrClosed); what the pipe
	// still held is dropped, as the client would drop it.
	_ = p.outputs[0].Close()
	return true
}

// wait blocks until every goroutine of the process has finished.
func (p *srvProcess) wait() { p.wg.Wait() }

func (p *srvProcess) resize(cols, rows uint16) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ptmx != nil && !p.closed {
		_ = setWinsize(p.ptmx, cols, rows)
	}
}

// connectionEnv is SSH_CONNECTION and SSH_CLIENT, as sshd sets them, for a
// connection from remote to local. An end without a TCP address (stdio, a
// sandbox's tunnel) is "UNKNOWN 65535", as sshd -i names each end of a
// pipe: programs and shell profiles test them to know they run over SSH
// (tmux, prompts, gpg's pinentry), and without them a session through the
// gateway looked local. A gateway that names the caller
// (internal/proxyproto) makes remote the caller's address; local, on a
// stream of an agent's tunnel, is the agent's end of the tunnel's TCP
// conn, the address its host reached the gateway from.
func connectionEnv(remote, local net.Addr) []string {
	rip, rport := "UNKNOWN", 65535
	if ra, ok := remote.(*net.TCPAddr); ok {
		rip, rport = ra.IP.String(), ra.Port
	}
	lip, lport := "UNKNOWN", 65535
	if la, ok := local.(*net.TCPAddr); ok {
		lip, lport = la.IP.String(), la.Port
	}
	return []string{
		fmt.Sprintf("SSH_CONNECTION=%s %d %s %d", rip, rport, lip, lport),
		fmt.Sprintf("SSH_CLIENT=%s %d %d", rip, rport, lport),
	}
}
