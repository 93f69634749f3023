package dockerhost

import (
	"bytes"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hostgate/hostgate/internal/textcut"
)

const (
	// toolLineBytes is the most of one line of a tool's words a message
	// keeps; a longer line keeps its start and its end.
	toolLineBytes = 160
	// toolLineEnd is what a cut line keeps of its end, where tar and git
	// put the reason ("File name too long").
	toolLineEnd = 64
)

// toolWords is what a tool (tar, git) said, cut for an answer: its first
// three lines, each cut in the middle past toolLineBytes, and
// maxEngineWords in all. A line naming a path of 4 KB (a tree deeper than
// a path may be) was cut at its start only, the reason at its end lost.
func toolWords(s string) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", 4)
	if len(lines) > 3 {
		lines = append(lines[:3], "…")
	}
	for i, l := range lines {
		lines[i] = cutMiddle(strings.TrimSpace(l), toolLineBytes, toolLineEnd)
	}
	return textcut.Cut(strings.Join(lines, "; "), maxEngineWords)
}

// cutMiddle cuts s to about n bytes when it is longer, keeping its last
// end bytes, "…" between; at rune boundaries.
func cutMiddle(s string, n, end int) string {
	if len(s) <= n+len("…") { // a lineCutter's line, cut already
		return s
	}
	return joinCut([]byte(s[:n-end]), []byte(s[len(s)-end:]))
}

// joinCut joins a line's start and end, "…" for what was between, each
// cut at a rune boundary (a character cut in two showed as U+FFFD).
func joinCut(head, tail []byte) string {
	for r := len(head) - 1; r >= 0 && r >= len(head)-utf8.UTFMax; r-- {
		if utf8.RuneStart(head[r]) {
			if !utf8.FullRune(head[r:]) {
				head = head[:r]
			}
			break
		}
	}
	i := 0
	for i < len(tail) && i < utf8.UTFMax && !utf8.RuneStart(tail[i]) {
		i++
	}
	return string(head) + "…" + string(tail[i:])
}

// maxToolLines bounds the lines a lineCutter keeps.
const maxToolLines = 32

// lineCutter keeps what a tool writes as toolWords answers it, however
// long its lines: the start and the end of each of its first lines. A 4 KB
// capture of tar's words ended inside the path of a tree deeper than a
// path may be, its reason ("File name too long") lost. It never fails a
// write: it holds diagnostics, which must never stall the command.
type lineCutter struct {
	mu    sync.Mutex
	lines []string
	cur   cutLine
}

// cutLine is one line being written: its first bytes, its last, and how
// many it had in all.
type cutLine struct {
	head, tail []byte
	n          int
}

func (c *lineCutter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for rest := p; len(rest) > 0 && len(c.lines) < maxToolLines; {
		b, after, nl := bytes.Cut(rest, []byte("\n"))
		c.cur.add(b)
		if nl {
			c.lines = append(c.lines, c.cur.String())
			c.cur = cutLine{}
		}
		rest = after
	}
	return len(p), nil
}

// String is the lines written so far, a last one without its newline
// too.
func (c *lineCutter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	lines := c.lines
	if c.cur.n > 0 && len(lines) < maxToolLines {
		lines = append(lines[:len(lines):len(lines)], c.cur.String())
	}
	return strings.Join(lines, "\n")
}

func (l *cutLine) add(b []byte) {
	l.n += len(b)
	if k := min(toolLineBytes-toolLineEnd-len(l.head), len(b)); k > 0 {
		l.head = append(l.head, b[:k]...)
		b = b[k:]
	}
	l.tail = append(l.tail, b...)
	if len(l.tail) > 2*toolLineEnd {
		l.tail = append(l.tail[:0:0], l.tail[len(l.tail)-toolLineEnd:]...)
	}
}

// String is the line as cutMiddle would cut it whole.
func (l *cutLine) String() string {
	if l.n <= toolLineBytes {
		return string(l.head) + string(l.tail)
	}
	return joinCut(l.head, l.tail[len(l.tail)-toolLineEnd:])
}
