package sftp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"unsafe"
)

// hostgate: fuzz targets of the client's reply parsing, which a client
// runs on whatever the host it reached sends (HOSTGATE.md, change 1, and
// the unmarshal functions its replies go through). Their names hold
// "Hostgate" so that scripts/test's -run Hostgate runs their seed corpora.

// FuzzHostgateRecvPacket reads a stream of replies (spec in 4-byte
// records: type byte and a 3-byte length; a spec of odd length cuts the
// last reply short): each reply comes back with its type and exactly its
// bytes, or, for a length over the limit, zero or cut short, an error; a
// reply in a recycled page keeps its bytes while later replies are read
// and other pages go back to the pool.
func FuzzHostgateRecvPacket(f *testing.F) {
	rec := func(typ byte, n int) []byte { return []byte{typ, byte(n >> 16), byte(n >> 8), byte(n)} }
	cat := func(rs ...[]byte) []byte { return bytes.Join(rs, nil) }
	f.Add([]byte("data"), cat(rec(byte(sshFxpData), 255<<10), rec(byte(sshFxpData), 255<<10), rec(byte(sshFxpStatus), 30), rec(byte(sshFxpData), 32<<10)))
	f.Add([]byte{1, 2, 3}, cat(rec(byte(sshFxpData), 32<<10-1), rec(byte(sshFxpAttrs), maxMsgLength)))
	f.Add([]byte("z"), cat(rec(byte(sshFxpData), maxMsgLength+1)))
	f.Add([]byte("z"), cat(rec(byte(sshFxpData), 0)))
	f.Add([]byte("cut"), append(cat(rec(byte(sshFxpData), 100<<10)), 0))
	f.Fuzz(func(t *testing.T, fill, spec []byte) {
		var stream []byte
		type sent = sentReply
		var want []sent
		cut := len(spec)%4 != 0
		for i := 0; i+4 <= len(spec) && i < 4*8; i += 4 {
			n := int(spec[i+1])<<16 | int(spec[i+2])<<8 | int(spec[i+3])
			stream = binary.BigEndian.AppendUint32(stream, uint32(n))
			if n == 0 || n > maxMsgLength {
				want = append(want, sent{})
				break
			}
			body := make([]byte, n)
			body[0] = spec[i]
			for j := 1; j < n; j++ {
				body[j] = byte(j) + byte(i)
				if len(fill) > 0 {
					body[j] = fill[j%len(fill)] ^ byte(i)
				}
			}
			if cut && (i+8 > len(spec) || i+4 >= 4*8) {
				stream = append(stream, body[:n/2]...)
				want = append(want, sent{})
				break
			}
			stream = append(stream, body...)
			want = append(want, sent{spec[i], body[1:]})
		}
		// hostgate: and from a channel that hands out its packets by
		// reference (change 6), in packets of random size.
		for _, shared := range []bool{false, true} {
			recvStream(t, stream, want, shared, fill)
		}
	})
}

type sentReply struct {
	typ  byte
	body []byte // nil: an error is due
}

func recvStream(t *testing.T, stream []byte, want []sentReply, shared bool, fill []byte) {
	var r io.Reader = bytes.NewReader(stream)
	var pr *packetReader
	if shared {
		pr = newPacketReader(t, r, uint64(len(fill)))
		r = pr
	}
	type kept struct {
		data, want []byte
		page       *respPage
		refs       *dataRefs
	}
	var keep []kept
	for i, w := range want {
		var rb recvBufs
		typ, data, err := recvPacket(r, nil, 0, &rb)
		page := rb.page
		if w.body == nil {
			if err == nil {
				t.Fatalf("reply %d: read %d bytes of a reply that is malformed or cut short", i, len(data))
			}
			if page != nil || rb.refs != nil {
				t.Fatalf("reply %d: a page or packets left with an error", i)
			}
			break
		}
		if rb.refs != nil {
			// The reply's data in the channel's packets: whole
			// (compared below), kept until released.
			if !shared || typ != sshFxpData || len(w.body)+1 < pagedMin || err != nil {
				t.Fatalf("reply %d: type %d of %d bytes shared (%v)", i, typ, len(w.body)+1, err)
			}
			full := bytes.Clone(data)
			for _, s := range rb.refs.segs {
				full = append(full, s...)
			}
			if !bytes.Equal(full, w.body) {
				t.Fatalf("reply %d: %d bytes shared, sent %d", i, len(full), len(w.body))
			}
			if i%2 == 1 {
				rb.release()
				continue
			}
			keep = append(keep, kept{data, w.body, nil, rb.refs})
			continue
		}
		if shared && typ == sshFxpData && len(w.body)+1 >= pagedMin {
			t.Fatalf("reply %d: a data reply of %d bytes not shared", i, len(w.body)+1)
		}
		if err != nil || byte(typ) != w.typ || !bytes.Equal(data, w.body) {
			t.Fatalf("reply %d: type %d, %d bytes (%v); sent type %d, %d bytes", i, typ, len(data), err, w.typ, len(w.body))
		}
		if paged := len(w.body)+1 >= pagedMin; paged != (page != nil) {
			t.Fatalf("reply %d of %d bytes: paged %v", i, len(w.body)+1, page != nil)
		}
		if page != nil {
			start := uintptr(unsafe.Pointer(&page.buf[0]))
			if p := uintptr(unsafe.Pointer(unsafe.SliceData(data))); p < start || p+uintptr(len(data)) > start+uintptr(len(page.buf)) {
				t.Fatalf("reply %d: data outside its page", i)
			}
			if len(page.buf) > max(pageSizes[0], 2*(len(w.body)+1)) {
				t.Fatalf("reply %d of %d bytes: a page of %d", i, len(w.body)+1, len(page.buf))
			}
		}
		res := result{typ: typ, data: data, page: page}
		if i%2 == 1 {
			res.release() // copied out at once, as readChunkAt does
			continue
		}
		keep = append(keep, kept{data, w.body, page, nil})
	}
	for i, k := range keep {
		res := result{data: k.data, page: k.page, refs: k.refs}
		res.flatten()
		if !bytes.Equal(res.data, k.want) {
			t.Fatalf("kept reply %d changed while later replies were read", i)
		}
		res.release()
	}
	if pr != nil {
		if n := pr.held(); n != 0 {
			t.Fatalf("%d packets not given back", n)
		}
	}
}

// FuzzHostgateUnmarshalAttrs: the attributes of a reply (STAT, FSTAT,
// READDIR's entries) are parsed exactly: marshalled back with the same
// flags they are the bytes they came from, or they are refused.
func FuzzHostgateUnmarshalAttrs(f *testing.F) {
	all := uint32(sshFileXferAttrSize | sshFileXferAttrUIDGID | sshFileXferAttrPermissions | sshFileXferAttrACmodTime | sshFileXferAttrExtended)
	fs := &FileStat{Size: 1 << 40, UID: 1000, GID: 1000, Mode: 0o100644, Atime: 1, Mtime: 2, Extended: []StatExtended{{"user.a", "b"}}}
	f.Add(marshalFileStat(binary.BigEndian.AppendUint32(nil, all), all, fs))
	f.Add(marshalFileStat(binary.BigEndian.AppendUint32(nil, sshFileXferAttrSize), sshFileXferAttrSize, fs))
	f.Add([]byte{0, 0, 0, 0x80, 0xff, 0xff, 0xff, 0xff}) // extended count far beyond the bytes
	f.Add([]byte{0, 0, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		fs, rest, err := unmarshalAttrs(b)
		if err != nil {
			if !errors.Is(err, errShortPacket) {
				t.Fatalf("refused with %v, want a short packet", err)
			}
			return
		}
		flags := binary.BigEndian.Uint32(b)
		if again := append(marshalFileStat(nil, flags, fs), rest...); !bytes.Equal(again, b[4:]) {
			t.Fatalf("%+v with flags %#x marshals to %x, from %x", fs, flags, again, b[4:])
		}
	})
}

// FuzzHostgateReplyFields: a status reply is always an error (its code,
// message and language as sent), data is a part of the reply, and a reply
// for another request is refused.
func FuzzHostgateReplyFields(f *testing.F) {
	status := marshalStatus(binary.BigEndian.AppendUint32(nil, 7), StatusError{Code: sshFxNoSuchFile, msg: "no such file", lang: "en"})
	f.Add(uint32(7), status)
	f.Add(uint32(8), status)
	f.Add(uint32(7), binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 7), 5))
	f.Add(uint32(7), []byte{0, 0, 0, 7, 0, 0, 0, 2, 'h', 'i'})
	f.Add(uint32(7), []byte{0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, id uint32, b []byte) {
		forUs := len(b) >= 4 && binary.BigEndian.Uint32(b) == id
		err := unmarshalStatus(id, b)
		var se *StatusError
		switch {
		case err == nil:
			t.Fatal("a status reply read as success")
		case !forUs && errors.As(err, &se):
			t.Fatalf("a status of another request (%x) taken: %v", b, err)
		case forUs && len(b) >= 8 && (!errors.As(err, &se) || se.Code != binary.BigEndian.Uint32(b[4:])):
			t.Fatalf("status %x read as %v", b, err)
		}
		data, err := unmarshalDataReply(id, b)
		if err == nil {
			if !forUs || len(b) < 8 || len(data) != int(binary.BigEndian.Uint32(b[4:])) || !bytes.Equal(data, b[8:8+len(data)]) {
				t.Fatalf("data reply %x read as %x", b, data)
			}
		}
		var sid uint32
		var s string
		if unmarshalIDString(b, &sid, &s) == nil && (sid != binary.BigEndian.Uint32(b) || len(s) > len(b)-8) {
			t.Fatalf("%x read as id %d, %q", b, sid, s)
		}
		if ep, rest, err := unmarshalExtensionPair(b); err == nil {
			again := append(marshalString(marshalString(nil, ep.Name), ep.Data), rest...)
			if !bytes.Equal(again, b) {
				t.Fatalf("extension %+v from %x", ep, b)
			}
		}
	})
}
