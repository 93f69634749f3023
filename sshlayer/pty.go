//go:build unix

package sshlayer

import (
	"errors"
	"os"

	"github.com/creack/pty"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// maxTermLen bounds the TERM value a client may set.
const maxTermLen = 256

// ptyRequest is a parsed pty-req (RFC 4254 §6.2).
type ptyRequest struct {
	Term       string
	Cols, Rows uint16
	Modes      []ttyMode // applied to the terminal before the command starts
}

// windowChange is a parsed window-change request (RFC 4254 §6.7).
type windowChange struct {
	Cols, Rows uint16
}

var errBadPtyRequest = errors.New("bad pty request")

// parsePtyRequest decodes a pty-req payload. Sizes are clamped to what a
// kernel winsize holds; a zero size means the default 80x24.
func parsePtyRequest(b []byte) (*ptyRequest, error) {
	var m struct {
		Term                 string
		Cols, Rows, PxW, PxH uint32
		Modes                string
	}
	if err := ssh.Unmarshal(b, &m); err != nil {
		return nil, errBadPtyRequest
	}
	if len(m.Term) > maxTermLen {
		return nil, errBadPtyRequest
	}
	for i := 0; i < len(m.Term); i++ {
		if c := m.Term[i]; c <= ' ' || c >= 0x7f || c == '=' {
			return nil, errBadPtyRequest
		}
	}
	p := &ptyRequest{Term: m.Term, Cols: clampDim(m.Cols, 80), Rows: clampDim(m.Rows, 24), Modes: parseTTYModes([]byte(m.Modes))}
	if p.Term == "" {
		p.Term = "xterm-256color"
	}
	return p, nil
}

func parseWindowChange(b []byte) (windowChange, error) {
	var m struct{ Cols, Rows, PxW, PxH uint32 }
	if err := ssh.Unmarshal(b, &m); err != nil {
		return windowChange{}, errBadPtyRequest
	}
	return windowChange{Cols: clampDim(m.Cols, 80), Rows: clampDim(m.Rows, 24)}, nil
}

func clampDim(v uint32, def uint16) uint16 {
	switch {
	case v == 0:
		return def
	case v > 0xffff:
		return 0xffff
	}
	return uint16(v)
}

// openPTY opens a pseudo-terminal pair. The master is returned in
// non-blocking mode, registered with Go's poller, so that closing it
// unblocks a pending Read: pty.Open leaves it blocking (it calls Fd), and a
// blocked read would outlive the session when a descendant that escaped the
// process group keeps the terminal open.
func openPTY() (ptmx, tty *os.File, err error) {
	m, t, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = m.Close() }()
	fd, err := unix.Dup(int(m.Fd()))
	if err != nil {
		_ = t.Close()
		return nil, nil, err
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		_ = t.Close()
		return nil, nil, err
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), t, nil
}

// setWinsize sets the size of the terminal behind ptmx, without File.Fd
// (which would switch the master back to blocking mode).
func setWinsize(ptmx *os.File, cols, rows uint16) error {
	sc, err := ptmx.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	err = sc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
	})
	return errors.Join(err, ierr)
}
