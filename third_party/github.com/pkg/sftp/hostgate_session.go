package sftp

import (
	"errors"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// NewClientSession starts the sftp subsystem on s, a session channel the
// caller opened (one kept open ahead for the next command, say), and
// returns a client over it. The subsystem request and the client's init
// go out together, where NewClient waits for the request's reply first: a
// round trip less, and one more where s was opened ahead (hostgate change
// 24). The call owns s: a refused request closes it, and its error is the
// call's, as any failure closes it; the client's Close closes it.
func NewClientSession(s *ssh.Session, opts ...ClientOption) (*Client, error) {
	pw, err := s.StdinPipe()
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	pr, err := s.StdoutPipe()
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	perr, err := s.StderrPipe()
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	refused := make(chan error, 1)
	go func() {
		ok, err := s.SendRequest("subsystem", true, ssh.Marshal(&struct{ Name string }{"sftp"}))
		if err == nil && !ok {
			err = errSubsystemRefused
		}
		if err != nil {
			// The init's answer will never come: end the wait for it.
			_ = s.Close()
		}
		refused <- err
	}()
	c, err := newClientPipe(pr, perr, pw, s.Wait, opts...)
	if rerr := <-refused; rerr != nil {
		if c != nil {
			_ = c.Close()
		}
		return nil, rerr
	}
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	c.clientConn.end = s.Close // change 32: Close ends the session
	return c, nil
}

// errSubsystemRefused is x/crypto's error for a refused subsystem request
// (Session.RequestSubsystem's), which NewClient returns.
var errSubsystemRefused = errors.New("ssh: subsystem request failed")
