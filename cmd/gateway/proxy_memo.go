package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hostgate/hostgate/internal/gateway/wire"
)

// proxyDirectRetry is how long gateway proxy keeps to the relay for a host
// after its direct path failed from here, as the Go client does
// (client.directRetry): an address behind a firewall that drops the
// packets (an agent's LAN address, seen from outside that LAN) costs each
// try the whole connect bound, and an ssh run is a proxy process of its
// own, so the memory of the failure is a file.
const proxyDirectRetry = time.Minute

// directMemo is the file that remembers one host's failed direct path,
// for one gateway, under the user's cache directory. Its time is the
// failure's; it holds the reason, for --verbose. A zero directMemo (no
// cache directory: no HOME) remembers nothing.
type directMemo struct{ path string }

// directMemoFor is host's memo at gateway gw: a file named by a hash of
// both, so that any host id makes a safe file name and two gateways' hosts
// of one id stay apart.
func directMemoFor(gw, host string) directMemo {
	dir, err := os.UserCacheDir()
	if err != nil {
		return directMemo{}
	}
	sum := sha256.Sum256([]byte(gw + "\x00" + host))
	return directMemo{filepath.Join(dir, "hostgate", "direct-failed", hex.EncodeToString(sum[:16]))}
}

// recent answers why the direct path failed, and when the proxy may try
// it again, if it failed less than proxyDirectRetry ago.
func (m directMemo) recent(now time.Time) (why string, until time.Time, ok bool) {
	if m.path == "" {
		return "", time.Time{}, false
	}
	fi, err := os.Stat(m.path)
	if err != nil {
		return "", time.Time{}, false
	}
	until = fi.ModTime().Add(proxyDirectRetry)
	if !now.Before(until) || fi.ModTime().After(now.Add(time.Minute)) { // stale, or from a clock set back
		return "", time.Time{}, false
	}
	b, _ := os.ReadFile(m.path)
	return strings.TrimSpace(string(b)), until, true
}

// failed remembers that the direct path failed now, and why. Best effort:
// a cache directory that cannot be written only costs the next run the
// try again. Written whole, then renamed: ssh runs in parallel read it.
func (m directMemo) failed(why error) {
	if m.path == "" {
		return
	}
	if err := os.MkdirAll(filepath.Dir(m.path), 0o700); err != nil {
		return
	}
	msg := wire.DirectFailedValue(why) // one line, cut whole runes
	f, err := os.CreateTemp(filepath.Dir(m.path), ".tmp-*")
	if err != nil {
		return
	}
	_, werr := f.WriteString(msg + "\n")
	if cerr := f.Close(); werr != nil || cerr != nil || os.Rename(f.Name(), m.path) != nil {
		_ = os.Remove(f.Name())
	}
}

// worked forgets a failure: the direct path works from here again.
func (m directMemo) worked() {
	if m.path != "" {
		_ = os.Remove(m.path)
	}
}

// usable reports whether the direct path may be tried now; where it failed
// too recently, say tells why not.
func (m directMemo) usable(say func(format string, args ...any)) bool {
	why, until, ok := m.recent(time.Now())
	if ok {
		say("through the gateway's relay: the direct path failed from here (%s); tried again after %s", why, until.Format(time.TimeOnly))
	}
	return !ok
}
