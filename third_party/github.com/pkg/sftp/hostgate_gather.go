package sftp

// hostgate: change 12 (HOSTGATE.md). File.WriteTo made a Write per reply
// (over a pipe) or per SSH channel packet of a reply (change 6: up to
// nine of at most 32 KiB for a 255 KiB reply), and one more for the rest
// of a reply answered short: a write(2) each to a file or a pipe. To a
// writer that takes several buffers in one call, the replies that have
// come when the writer is free are gathered and written in one call
// (writev), up to gatherMax bytes, without a copy.

import (
	"io"
	"net"
	"os"
)

const (
	gatherMax  = 1 << 20 // bytes written in one call, at most
	gatherBufs = 256     // buffers in one call, at most (IOV_MAX is 1024)
)

// gather holds the bytes of the replies WriteTo has taken and not yet
// written, and what to give back once they are.
type gather struct {
	writev func(bufs [][]byte) (int64, error)
	freed  chan<- int // WriteTo's budget, given back per reply written

	bufs  [][]byte
	bytes int
	refs  []*dataRefs
	pages []*respPage
	sizes []int
}

// gatherFor returns a gather for w, or nil when w takes one buffer a call.
func gatherFor(w io.Writer, freed chan<- int) *gather {
	var writev func([][]byte) (int64, error)
	switch w := w.(type) {
	case *os.File:
		// Standard output and error keep os.File.Write's broken pipe,
		// which ends the program as SIGPIPE does.
		if w != os.Stdout && w != os.Stderr {
			writev = fileWritev(w)
		}
	case net.Conn:
		writev = func(bufs [][]byte) (int64, error) {
			nb := net.Buffers(bufs)
			return nb.WriteTo(w)
		}
	}
	if writev == nil {
		return nil
	}
	return &gather{writev: writev, freed: freed, bufs: make([][]byte, 0, gatherBufs+16)}
}

// add takes a reply's bytes: those of refs that sharedData kept, or b,
// then rest; page and refs are given back, and size to the budget, once
// they are written.
func (g *gather) add(refs *dataRefs, b, rest []byte, page *respPage, size int) {
	if refs != nil {
		left := refs.keep
		for _, s := range refs.segs {
			if left == 0 {
				break
			}
			s = s[:min(len(s), left)]
			g.bufs = append(g.bufs, s)
			left -= len(s)
			g.bytes += len(s)
		}
		g.refs = append(g.refs, refs)
	} else if len(b) > 0 {
		g.bufs = append(g.bufs, b)
		g.bytes += len(b)
	}
	if len(rest) > 0 {
		g.bufs = append(g.bufs, rest)
		g.bytes += len(rest)
	}
	if page != nil {
		g.pages = append(g.pages, page)
	}
	g.sizes = append(g.sizes, size)
}

// full says whether the next reply should wait for a write.
func (g *gather) full() bool { return g.bytes >= gatherMax || len(g.bufs) >= gatherBufs }

// flush writes what g holds, in one call where the writer takes it, and
// gives back its replies.
func (g *gather) flush() (int64, error) {
	if g == nil {
		return 0, nil
	}
	var n int64
	var err error
	if len(g.bufs) > 0 {
		n, err = g.writev(g.bufs)
		if err == nil && n < int64(g.bytes) {
			err = io.ErrShortWrite
		}
	}
	for _, s := range g.sizes {
		g.freed <- s // never blocks, one per request
	}
	g.drop()
	return n, err
}

// drop gives back what g holds without writing it.
func (g *gather) drop() {
	if g == nil {
		return
	}
	for _, r := range g.refs {
		r.release()
	}
	for _, p := range g.pages {
		p.put()
	}
	clear(g.bufs)
	clear(g.refs)
	clear(g.pages)
	g.bufs, g.refs, g.pages, g.sizes, g.bytes = g.bufs[:0], g.refs[:0], g.pages[:0], g.sizes[:0], 0
}
