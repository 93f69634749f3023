package sshlayer

import (
	"context"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/bicopy"
)

// Agent forwarding's request and channel (OpenSSH's PROTOCOL.agent).
const (
	agentRequest = "auth-agent-req@openssh.com"
	agentChannel = "auth-agent@openssh.com"
)

// serveAgent carries every auth-agent@openssh.com channel the server opens
// to a connection ClientConfig.ForwardAgent dials, until the connection
// ends (which closes chans and, through ctx, every copy). It is counted in
// c.wg, as is each copy.
func (c *Client) serveAgent(chans <-chan ssh.NewChannel) {
	defer c.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for nc := range chans {
		if !c.track() {
			_ = nc.Reject(ssh.ConnectionFailed, "client closing")
			continue
		}
		go func() {
			defer c.wg.Done()
			ac, err := c.cfg.ForwardAgent()
			if err != nil {
				c.log.Debug("forwarded agent: dial", "err", err)
				_ = nc.Reject(ssh.ConnectionFailed, "agent unreachable")
				return
			}
			ch, reqs, err := nc.Accept()
			if err != nil {
				_ = ac.Close()
				return
			}
			ssh.DiscardLazily(ch, reqs)
			_, _ = bicopy.Copy(ctx, ch, ac)
		}()
	}
}
