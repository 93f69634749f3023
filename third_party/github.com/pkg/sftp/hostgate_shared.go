package sftp

// hostgate: change 6 (HOSTGATE.md). A data reply's bytes are left where
// the SSH channel received them, in its recycled packets, and File.WriteTo
// writes them from there: upstream (and change 1) copied every byte of a
// download into the reply's buffer first, the one copy on the client's
// path whose source was cold (it waited in the channel's buffer).

import (
	"io"
	"sync"
)

// sharedReader is an SSH channel of hostgate's x/crypto fork (change 15
// there): ReadShared returns up to max bytes of one received packet where
// they lie, valid until their Release, which must be called exactly once.
type sharedReader interface {
	ReadShared(max int) ([]byte, interface{ Release() }, error)
}

// recvBufs is what recvPacket read a client's reply into, for the
// reply's result to give back: a page (change 1) or the channel's
// packets.
type recvBufs struct {
	page *respPage
	refs *dataRefs
}

func (rb *recvBufs) release() {
	r := result{page: rb.page, refs: rb.refs}
	r.release()
	rb.page, rb.refs = nil, nil
}

// dataRefs holds the data of one data reply as parts of the channel's
// packets, in order, each with its release.
type dataRefs struct {
	hdr  [9]byte // the reply's type, id and data length
	segs [][]byte
	rels []interface{ Release() }
	keep int // the bytes of data WriteTo writes (see result.sharedData)
}

var dataRefsPool = sync.Pool{New: func() any {
	// A 255 KiB reply spans nine packets of 32 KiB at most.
	return &dataRefs{segs: make([][]byte, 0, 12), rels: make([]interface{ Release() }, 0, 12)}
}}

// release gives every part back to the channel, once.
func (d *dataRefs) release() {
	for i, rel := range d.rels {
		rel.Release()
		d.rels[i], d.segs[i] = nil, nil
	}
	d.segs, d.rels, d.keep = d.segs[:0], d.rels[:0], 0
	dataRefsPool.Put(d)
}

// size is the number of bytes held.
func (d *dataRefs) size() int {
	n := 0
	for _, s := range d.segs {
		n += len(s)
	}
	return n
}

// recvShared reads the rest of a reply of length bytes (at least
// pagedMin) from r, the channel sr: a data reply's data by reference,
// into rb.refs, returning its id and data length as the payload; any
// other reply into a page, as recvPacket does.
func recvShared(r io.Reader, sr sharedReader, length uint32, rb *recvBufs) (fxp, []byte, error) {
	d := dataRefsPool.Get().(*dataRefs)
	if n, err := io.ReadFull(r, d.hdr[:]); err != nil {
		err = bodyError(d.hdr[:n], length, err)
		d.release()
		return 0, nil, err
	}
	typ := fxp(d.hdr[0])
	if typ != sshFxpData {
		page := getPage(int(length))
		b := page.buf
		copy(b, d.hdr[:])
		d.release()
		n, err := io.ReadFull(r, b[len(d.hdr):length])
		if err != nil {
			return 0, nil, bodyError(b[:len(d.hdr)+n], length, err)
		}
		rb.page = page
		return typ, b[1:length], nil
	}
	rest := int(length) - len(d.hdr)
	for rest > 0 {
		p, rel, err := sr.ReadShared(rest)
		if len(p) > 0 {
			d.segs = append(d.segs, p)
			d.rels = append(d.rels, rel)
			rest -= len(p)
		}
		if err != nil && rest > 0 {
			err = bodyError(d.hdr[:], length, err)
			d.release()
			return 0, nil, err
		}
	}
	rb.refs = d
	return typ, d.hdr[1:], nil
}

// flatten turns a data reply whose data is in the channel's packets into
// one in a page, as change 1 reads it, for the callers that copy it out
// (those that keep it get a copy of the page from sendPacket).
func (r *result) flatten() {
	d := r.refs
	if d == nil {
		return
	}
	page := getPage(len(r.data) + d.size())
	n := copy(page.buf, r.data)
	for _, s := range d.segs {
		n += copy(page.buf[n:], s)
	}
	r.data, r.page, r.refs = page.buf[:n], page, nil
	d.release()
}

// sharedData checks a data reply whose data is in r.refs, as
// unmarshalDataReply does, and keeps at most max bytes of its data for
// writeTo; it returns their number.
func (r *result) sharedData(id uint32, max int) (int, error) {
	b, err := unmarshalSID(id, r.data)
	if err != nil {
		return 0, err
	}
	l, _, err := unmarshalCount(b)
	if err != nil {
		return 0, err
	}
	if l > r.refs.size() {
		return 0, errShortPacket
	}
	r.refs.keep = min(l, max)
	return r.refs.keep, nil
}

// writeTo writes the bytes sharedData kept to w, in order.
func (d *dataRefs) writeTo(w io.Writer) (int64, error) {
	var written int64
	left := d.keep
	for _, s := range d.segs {
		if left == 0 {
			break
		}
		s = s[:min(len(s), left)]
		n, err := w.Write(s)
		written += int64(n)
		left -= n
		if err != nil {
			return written, err
		}
		if n < len(s) {
			return written, io.ErrShortWrite
		}
	}
	return written, nil
}
