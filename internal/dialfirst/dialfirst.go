// Package dialfirst dials a host's several addresses at once and keeps
// the first connection, as happy eyeballs does between address families:
// an agent publishes each of its interfaces' addresses for its direct
// sessions, and most callers reach only some of them. The Go client and
// `gateway proxy` both dial a host's direct addresses with it.
package dialfirst

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Dial dials every address of addrs (TCP, "host:port") at once, each
// connect bounded by timeout within ctx, and returns the first connection
// made; the others are given up or closed. It fails, naming every
// address's error, when none answers.
func Dial(ctx context.Context, addrs []string, timeout time.Duration) (net.Conn, error) {
	if len(addrs) == 0 {
		return nil, errors.New("no direct address")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		conn net.Conn
		err  error
	}
	results := make(chan result, len(addrs)) // every dialer sends once, unread or not
	var d net.Dialer
	for _, a := range addrs {
		go func() {
			conn, err := d.DialContext(ctx, "tcp", a)
			results <- result{conn, err}
		}()
	}
	var errs []error
	var won net.Conn
	for range addrs {
		r := <-results
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
		case won == nil:
			won = r.conn
			cancel() // the others give up
		default:
			_ = r.conn.Close()
		}
	}
	if won != nil {
		return won, nil
	}
	return nil, fmt.Errorf("direct: no address answered: %w", errors.Join(errs...))
}
