//go:build unix

package sshlayer

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
)

// TestPTYOutputWaitsOnTheHost: a terminal's output that its reader stops
// taking waits on the host, not in the client: after a reader that kept up
// with a flood stops, the host gets at most ptyWindow (and its own
// buffers) further. The channel's window had grown to 8 MiB while the
// reader kept up, so a web terminal whose page fell behind had up to 8 MiB
// at the gateway to draw before a Ctrl-C showed (7.7 MiB after 30 s of
// yes).
func TestPTYOutputWaitsOnTheHost(t *testing.T) {
	ahead := floodAhead(t, 0)
	// The window, and the host's own buffers (the pty's, the agent's
	// copy of the pty's output), with room to spare.
	const bound = ptyWindow + 512<<10
	t.Logf("the host wrote %d KiB ahead of the reader", ahead>>10)
	if ahead > bound {
		t.Errorf("the host wrote %.2f MiB ahead of a terminal reader that stopped, want at most %.2f MiB", float64(ahead)/(1<<20), float64(bound)/(1<<20))
	}
}

// TestPTYOutputWindowSet: a terminal whose reader sets a smaller output
// window (a web terminal's page that draws slowly) has at most that much
// (and the host's own buffers) written ahead of it: 1 MiB stayed in flight
// whatever was set, which a slow page drew for tens of seconds before
// Ctrl-C's prompt.
func TestPTYOutputWindowSet(t *testing.T) {
	const window = 64 << 10
	ahead := floodAhead(t, window)
	const bound = window + 256<<10
	t.Logf("the host wrote %d KiB ahead of the reader", ahead>>10)
	if ahead > bound {
		t.Errorf("the host wrote %d KiB ahead of a terminal reader that set a %d KiB window and stopped, want at most %d KiB", ahead>>10, window>>10, bound>>10)
	}
}

// floodAhead floods a PTY, reads 16 MiB of it (setting the output window
// to window first, unless 0) and stops: it returns how far the host
// wrote past what was read.
func floodAhead(t *testing.T, window int) int64 {
	t.Helper()
	_, c := startEmbedded(t)
	ctx := testCtx(t)
	count := filepath.Join(t.TempDir(), "count")
	// Raw, so the bytes cross the pty as they are; count says how many
	// 64 KiB chunks the host has written.
	p, err := c.Spawn(ctx, []string{"sh", "-c", `stty raw -echo; i=0; while :; do head -c 65536 /dev/zero; i=$((i+1)); echo $i > ` + count + `; done`},
		hostgate.SpawnOptions{PTY: &hostgate.PTY{Cols: 80, Rows: 24}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill(hostgate.SIGKILL); _ = p.Wait() }()
	if window > 0 {
		p.(interface{ SetOutputWindow(int) }).SetOutputWindow(window)
	}
	// Keep up for a while: this is what grew the window, and what shrinks
	// a window granted before the limit.
	const kept = 16 << 20
	if _, err := io.CopyN(io.Discard, p.Stdout(), kept); err != nil {
		t.Fatal(err)
	}
	// Then stop reading. The host's writes block once what is between it
	// and this reader is full: wait until its count has not moved for a
	// second (bounded: it must stop within a minute).
	written := func() int64 {
		b, _ := os.ReadFile(count)
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n << 16
	}
	last, idle := int64(-1), 0
	for deadline := time.Now().Add(time.Minute); idle < 10; {
		if time.Now().After(deadline) {
			t.Fatalf("the host kept writing with nobody reading: %d MiB", written()>>20)
		}
		time.Sleep(100 * time.Millisecond)
		if n := written(); n == last {
			idle++
		} else {
			idle, last = 0, n
		}
	}
	return last - kept
}

// TestPTYOutputWaitsFromTheStart: a terminal's host that prints and is
// never read has at most ptyStartWindow (and its own buffers) written:
// the session opened with the spare's 1 MiB window, which a window set
// later cannot take back, so a slow web page drew a megabyte of its first
// flood after Ctrl-C (5.1-5.3 s in Chromium throttled 20x, 0.6-0.8 s for
// the floods after it).
func TestPTYOutputWaitsFromTheStart(t *testing.T) {
	_, c := startEmbedded(t)
	ctx := testCtx(t)
	// A command first, so a spare session is open for the terminal.
	first, err := c.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err != nil {
		t.Fatal(err)
	}
	waitSpare(t, c)
	count := filepath.Join(t.TempDir(), "count")
	p, err := c.Spawn(ctx, []string{"sh", "-c", `stty raw -echo; i=0; while :; do head -c 4096 /dev/zero; i=$((i+1)); echo $i > ` + count + `; done`},
		hostgate.SpawnOptions{PTY: &hostgate.PTY{Cols: 80, Rows: 24}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill(hostgate.SIGKILL); _ = p.Wait() }()
	written := func() int64 {
		b, _ := os.ReadFile(count)
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n << 12
	}
	last, idle := int64(-1), 0
	for deadline := time.Now().Add(time.Minute); idle < 10; {
		if time.Now().After(deadline) {
			t.Fatalf("the host kept writing with nobody reading: %d MiB", written()>>20)
		}
		time.Sleep(100 * time.Millisecond)
		if n := written(); n == last {
			idle++
		} else {
			idle, last = 0, n
		}
	}
	const bound = ptyStartWindow + 256<<10
	t.Logf("the host wrote %d KiB with nobody reading", last>>10)
	if last > bound {
		t.Errorf("the host wrote %d KiB of a terminal nobody read, want at most %d KiB", last>>10, bound>>10)
	}
}
