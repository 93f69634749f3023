package bicopy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// LeadWait is how long DialLead waits for a client's first bytes before it
// dials without them. A client that speaks first (HTTP, TLS, Redis,
// PostgreSQL) writes within a scheduler's wake-up of its connect; one
// whose server speaks first (SSH, SMTP, MySQL) pays this once per
// connection.
const LeadWait = 500 * time.Microsecond

// ErrLeadFailed wraps the error of a src that failed while DialLead waited
// for its first bytes (a reset): nothing was dialed.
var ErrLeadFailed = errors.New("bicopy: connection failed before the dial")

// DialLead dials for src, an accepted connection, with what src's client
// sends first already written to the new conn: it waits up to wait for
// those bytes, then dials. Over an early dial (an SSH channel whose first
// writes travel behind its open, hostgate.EarlyDialer) the request and the
// open then leave in one burst, one message across every hop of the path
// instead of two, and the client's request loses nothing by the wait: it
// could not have left before it came. A wait of 0 dials at once (a dial
// that is not early gains nothing by waiting). n counts the bytes written.
// An error is the dial's, the write's (an early dial's refused connect may
// show here), or src's read other than its end (which Copy sees again),
// wrapped in ErrLeadFailed; the new conn is closed then, src is not.
func DialLead(src net.Conn, wait time.Duration, dial func() (net.Conn, error)) (c net.Conn, n int64, err error) {
	if wait <= 0 {
		c, err = dial()
		return c, 0, err
	}
	sp := smallPool.Get().(*[]byte)
	defer smallPool.Put(sp)
	nr, err := readWithin(src, *sp, wait)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrLeadFailed, err)
	}
	if c, err = dial(); err != nil {
		return nil, 0, err
	}
	if nr == 0 {
		return c, 0, nil
	}
	nw, err := c.Write((*sp)[:nr])
	if err != nil {
		_ = c.Close()
		return nil, int64(nw), err
	}
	return c, int64(nw), nil
}

// readWithin reads what src sends within wait: 0 and nil if nothing came,
// or src ended.
func readWithin(src net.Conn, p []byte, wait time.Duration) (int, error) {
	if err := src.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return 0, nil // no deadlines: dial at once
	}
	n, err := src.Read(p)
	if derr := src.SetReadDeadline(time.Time{}); derr != nil && err == nil {
		err = derr
	}
	switch {
	case n > 0:
		return n, nil
	case err == nil, errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, io.EOF):
		return 0, nil
	}
	return 0, err
}
