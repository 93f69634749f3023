package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/bicopy"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/tlshint"
)

func init() {
	register("proxy", "proxy HOST: OpenSSH ProxyCommand, stdio ↔ the host's SSH through the gateway", runProxy)
}

func runProxy(ctx context.Context, sio stdio, args []string) error {
	var gw, token string
	fs := newFlags("proxy", sio.err)
	fs.StringVar(&gw, "url", "", "gateway URL (http(s):// or ws(s)://)")
	fs.StringVar(&token, "token", "", "client or admin token")
	if err := parseUsage(fs, args, "usage: gateway proxy [--url URL] [--token TOKEN] HOST\n\nOpenSSH's ProxyCommand: joins stdin/stdout to host HOST's SSH through the gateway."); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(sio.err, "usage: gateway proxy [--url URL] [--token TOKEN] HOST")
		return errUsage
	}
	if gw == "" || token == "" {
		return errors.New("proxy: --url and --token (or HOSTGATE_URL, HOSTGATE_TOKEN) are required")
	}
	return proxy(ctx, sio.conn(), sio.err, gw, token, fs.Arg(0))
}

// conn is the standard streams as one stream: the process's fds 0 and 1
// in production, pipes in tests.
func (s stdio) conn() net.Conn {
	if s.in == os.Stdin {
		return bytestream.Stdio()
	}
	r, ok := s.in.(io.ReadCloser)
	if !ok {
		r = io.NopCloser(s.in)
	}
	w, ok := s.out.(io.WriteCloser)
	if !ok {
		w = nopWriteCloser{s.out}
	}
	return bytestream.NewPipeConn(r, w)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// proxy joins local (stdio) to host's SSH stream through the gateway. An
// error before the join is printed to stderr before local closes: ssh
// takes the closed stdout for the end, exits and hangs up on its
// ProxyCommand, which died before it could say why (ssh showed only
// "Connection closed by remote host").
func proxy(ctx context.Context, local net.Conn, stderr io.Writer, gw, token, host string) error {
	fail := func(err error) error {
		fmt.Fprintln(stderr, "gateway:", err)
		_ = local.Close()
		return reportedError{err}
	}
	u, err := url.Parse(strings.TrimRight(gw, "/"))
	if err != nil {
		return fail(fmt.Errorf("proxy: --url: %w", err))
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/v1/hosts/" + url.PathEscape(host) + "/ssh"
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	remote, _, err := bytestream.DialWebSocket(dctx, u.String(), &bytestream.WebSocketOptions{Header: h})
	cancel()
	if err != nil {
		var he *bytestream.HandshakeError
		if errors.As(err, &he) {
			if we, ok := wire.ParseError([]byte(he.Body)); ok {
				return fail(fmt.Errorf("proxy: host %s: %s (%d %s)", host, we.Message, he.StatusCode, we.Code))
			}
		}
		return fail(fmt.Errorf("proxy: host %s: %w", host, tlshint.Wrap(err)))
	}
	_, err = bicopy.Copy(ctx, local, remote)
	// A broken stdout is ssh gone: it closes the pipe when it is done,
	// and may do so with the host's last bytes still on their way.
	if errors.Is(err, context.Canceled) || errors.Is(err, syscall.EPIPE) {
		return nil
	}
	return err
}
