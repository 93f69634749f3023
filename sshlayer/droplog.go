package sshlayer

import (
	"sync"
	"time"
)

// dropLogEvery is how often connections dropped at a limit are logged.
const dropLogEvery = time.Minute

// dropLog counts connections dropped at a limit and says when to log them:
// the first at once, then at most one line per dropLogEvery with how many
// were dropped since the last. Code on the host (a sandbox's, untrusted)
// can connect in a loop, and a line per connection filled the agent's log
// and, for a sandbox, the gateway's, which logs what its agents write.
type dropLog struct {
	mu      sync.Mutex
	last    time.Time // of the last line; zero before the first
	dropped int       // since the last line
}

// drop counts one dropped connection; when log is true, the caller logs a
// line saying n were dropped.
func (d *dropLog) drop(now time.Time) (n int, log bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dropped++
	if !d.last.IsZero() && now.Sub(d.last) < dropLogEvery {
		return 0, false
	}
	n, d.dropped, d.last = d.dropped, 0, now
	return n, true
}
