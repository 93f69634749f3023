// Copyright 2026 The hostgate Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"bytes"
	"encoding/binary"
	"io"
	"reflect"
	"testing"
)

// hostgate: fuzz targets of the changes that parse received packets
// (HOSTGATE.md, changes 2, 4, 5 and 6). Their names hold "Hostgate" so
// that scripts/test's -run Hostgate runs their seed corpora.

// FuzzHostgateDecode: every message decode accepts marshals back to a
// packet of its type that decodes and marshals to itself (the cached type tags agree in
// both directions), and a packet is never taken for a message of another
// type.
func FuzzHostgateDecode(f *testing.F) {
	for _, m := range []interface{}{
		channelOpenMsg{ChanType: "direct-tcpip", PeersID: 3, PeersWindow: 1 << 21, MaxPacketSize: 1 << 15, TypeSpecificData: Marshal(channelOpenDirectMsg{raddr: "localhost", rport: 80, laddr: "0.0.0.0"})},
		channelOpenConfirmMsg{PeersID: 1, MyID: 2, MyWindow: 1 << 23, MaxPacketSize: 1 << 15},
		channelOpenFailureMsg{PeersID: 1, Reason: ConnectionFailed, Message: "connect failed"},
		windowAdjustMsg{PeersID: 7, AdditionalBytes: 1 << 20},
		channelEOFMsg{PeersID: 1}, channelCloseMsg{PeersID: 1},
		channelRequestMsg{PeersID: 1, Request: "exec", WantReply: true, RequestSpecificData: Marshal(struct{ Command string }{"ls"})},
		globalRequestMsg{Type: "tcpip-forward", WantReply: true, Data: Marshal(struct {
			Addr string
			Port uint32
		}{"localhost", 0})},
		kexInitMsg{KexAlgos: []string{"curve25519-sha256", "ext-info-c"}, ServerHostKeyAlgos: []string{"ssh-ed25519"}, CiphersClientServer: []string{"aes128-gcm@openssh.com"}},
		userAuthRequestMsg{User: "root", Service: "ssh-connection", Method: "publickey"},
		disconnectMsg{Reason: 11, Message: "bye"},
		channelDataMsg{PeersID: 1, Length: 2, Rest: []byte("hi")},
	} {
		f.Add(Marshal(m))
	}
	f.Add([]byte{msgChannelEOF, 0, 0, 0})       // short
	f.Add([]byte{msgChannelEOF, 0, 0, 0, 1, 9}) // trailing byte
	f.Add([]byte{msgChannelRequest, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{msgUserAuthSuccess, 1, 2})
	f.Fuzz(func(t *testing.T, packet []byte) {
		if len(packet) == 0 {
			return // readPacket refuses empty packets before any decode
		}
		var eof channelEOFMsg
		if err := Unmarshal(packet, &eof); err == nil && packet[0] != msgChannelEOF {
			t.Fatalf("a packet of type %d unmarshalled as an EOF", packet[0])
		}
		msg, err := decode(packet)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("refusal without a message")
			}
			return
		}
		typ := reflect.TypeOf(msg).Elem()
		if typ.NumField() == 0 {
			return // userAuthSuccessMsg: sent as its type byte, never marshalled
		}
		again := Marshal(msg)
		if again[0] != packet[0] {
			t.Fatalf("type %d decoded to %T, which marshals as type %d", packet[0], msg, again[0])
		}
		// Marshalled again, not compared with DeepEqual: a big.Int decoded
		// from a non-canonical mpint (a zero as one zero byte) is the same
		// number with another internal form.
		msg2, err := decode(again)
		if err != nil || !bytes.Equal(Marshal(msg2), again) {
			t.Fatalf("%T %+v marshals to %x, which decodes to %+v (%v)", msg, msg, again, msg2, err)
		}
		if !bytes.Equal(typeTags(typ), parseTypeTags(typ)) {
			t.Fatalf("%v: cached tags %v, tag says %v", typ, typeTags(typ), parseTypeTags(typ))
		}
	})
}

// FuzzHostgateEarlyData feeds an inbound channel's early data packets (b
// split by 2-byte lengths; each addressed to the channel unless its first
// byte is odd, then to an id nobody holds): the channel's reader gets
// exactly the data of the packets taken, in order; no more than the
// allowance is taken; the window shrinks by what was; packets for other
// ids are dropped; a malformed packet is an error.
func FuzzHostgateEarlyData(f *testing.F) {
	frame := func(ps ...[]byte) []byte {
		var out []byte
		for _, p := range ps {
			out = append(out, byte(len(p)>>8), byte(len(p)))
			out = append(out, p...)
		}
		return out
	}
	early := func(id uint32, data string) []byte {
		return Marshal(channelDataMsg{PeersID: id, Length: uint32(len(data)), Rest: []byte(data)})
	}
	f.Add(frame(early(7, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")), uint16(1))
	f.Add(frame(early(7, "a"), early(8, "b"), early(7, "c")), uint16(1))
	f.Add(frame(early(7, string(make([]byte, 8<<10)))), uint16(5))    // 40 KiB: over the allowance
	f.Add(frame([]byte{200, 0, 0, 0, 7, 0, 0, 0, 9, 'x'}), uint16(1)) // length beyond the data
	f.Add(frame([]byte{200, 0, 0, 0, 7, 0, 0, 0, 0, 'x'}), uint16(1)) // zero length
	f.Add(frame([]byte{200, 0, 0, 0}), uint16(1))
	f.Fuzz(func(t *testing.T, b []byte, rounds uint16) {
		const id = 7
		var packets [][]byte
		for len(b) >= 2 {
			n := min(int(b[0])<<8|int(b[1]), len(b)-2)
			p := append([]byte{msgChannelEarlyData}, b[2:2+n]...)
			if len(p) >= 5 {
				addr := uint32(id)
				if p[1]&1 == 1 {
					addr = 1000
				}
				binary.BigEndian.PutUint32(p[1:], addr)
			}
			packets = append(packets, p)
			b = b[2+n:]
		}
		m := &mux{}
		ch := m.newChannel("direct-tcpip", channelInbound, nil, false)
		ch.remoteId = id
		m.chanList.addRemote(ch)
		var want []byte
		var taken uint32
	feed:
		for range int(rounds%64) + 1 {
			for _, p := range packets {
				err := m.handleEarlyData(p)
				if err != nil {
					if err.Error() == "" {
						t.Fatal("refusal without a message")
					}
					break feed // the connection ends
				}
				if len(p) < 9 || binary.BigEndian.Uint32(p[1:]) != id {
					continue
				}
				n := binary.BigEndian.Uint32(p[5:9])
				if n != 0 && int(n) != len(p)-9 {
					t.Fatalf("took a packet of %d bytes whose length says %d", len(p)-9, n)
				}
				if n != 0 {
					want = append(want, p[9:]...)
					taken += n
				}
			}
		}
		if taken > earlyDataMax {
			t.Fatalf("took %d bytes of early data, allowance %d", taken, earlyDataMax)
		}
		if ch.myWindow != channelInitialWindow-taken {
			t.Fatalf("window %d after %d early bytes", ch.myWindow, taken)
		}
		ch.pending.eof()
		got, _ := io.ReadAll(ch.pending)
		if !bytes.Equal(got, want) {
			t.Fatalf("reader got %d bytes, %d were taken", len(got), len(want))
		}
	})
}

// FuzzHostgateGCMRead: a peer holding the session keys seals packets of its
// choosing (spec in 4-byte records: padding byte, message type, length);
// readCipherPacket returns each payload as RFC 4253 §6 lays it out or an
// error, and a packet it returned in a recycled buffer keeps its bytes
// while later packets are read and other buffers go back to the pool.
func FuzzHostgateGCMRead(f *testing.F) {
	rec := func(pad, typ byte, size uint16) []byte { return []byte{pad, typ, byte(size >> 8), byte(size)} }
	cat := func(rs ...[]byte) []byte { return bytes.Join(rs, nil) }
	f.Add([]byte("data"), cat(rec(8, msgChannelData, 32<<10+20), rec(8, msgChannelData, 32<<10+20), rec(4, msgChannelWindowAdjust, 20)), false)
	f.Add([]byte("x"), cat(rec(16, msgChannelExtendedData, 25<<10), rec(255, msgChannelData, 40<<10-1), rec(4, msgChannelData, 40<<10)), false)
	f.Add([]byte("req"), cat(rec(4, msgChannelRequest, 30<<10), rec(4, msgChannelData, 24<<10)), false)
	f.Add([]byte{}, cat(rec(3, msgChannelData, 30<<10), rec(200, msgChannelData, 100)), false)
	f.Add([]byte("y"), cat(rec(0, 0, 0)), false)
	f.Add([]byte("z"), cat(rec(8, msgChannelData, 30<<10)), true)
	f.Fuzz(func(t *testing.T, fill, spec []byte, tamper bool) {
		key := make([]byte, 16)
		iv := []byte("hostgate-ivX")
		w, err := newGCMCipher(key, bytes.Clone(iv), nil, DirectionAlgorithms{})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := newGCMCipher(key, bytes.Clone(iv), nil, DirectionAlgorithms{})
		wc, rc := w.(*gcmCipher), r.(*gcmCipher)
		type kept struct{ got, want []byte }
		var keep []kept
		for i := 0; i+4 <= len(spec) && i < 4*8; i += 4 {
			length := int(spec[i+2])<<8 | int(spec[i+3])
			plain := make([]byte, length)
			for j := range plain {
				plain[j] = byte(j) ^ byte(i)
				if len(fill) > 0 {
					plain[j] = fill[j%len(fill)] + byte(i)
				}
			}
			if length > 0 {
				plain[0] = spec[i]
			}
			if length > 1 {
				plain[1] = spec[i+1]
			}
			var prefix [4]byte
			binary.BigEndian.PutUint32(prefix[:], uint32(length))
			sealed := wc.aead.Seal(nil, wc.iv, plain, prefix[:])
			wc.incIV()
			last := i+8 > len(spec) || i+4 >= 4*8
			if tamper && last {
				sealed[len(sealed)/2] ^= 1
			}
			got, err := rc.readCipherPacket(0, bytes.NewReader(append(prefix[:], sealed...)))
			owned := rc.owned
			rc.owned = false
			if tamper && last {
				if err == nil {
					t.Fatal("a tampered packet was read")
				}
				break
			}
			var want []byte
			switch {
			case length == 0, plain[0] < 4, int(plain[0])+1 >= length:
			default:
				want = plain[1 : length-int(plain[0])]
			}
			if want == nil {
				if err == nil {
					t.Fatalf("packet %d (padding %d of %d bytes) read as %d bytes", i/4, plain[0], length, len(got))
				}
				break // the connection ends
			}
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("packet %d: read %d bytes (%v), sent %d", i/4, len(got), err, len(want))
			}
			if isPooled(got) && (!owned || !isChannelData(got)) {
				t.Fatalf("packet %d of type %d handed on in a recycled buffer (owned %v)", i/4, got[0], owned)
			}
			if !owned {
				got = bytes.Clone(got) // as connectionState.readPacket does
			}
			if (i/4)%2 == 1 {
				releasePacket(got) // read out at once, as a channel reader would
				continue
			}
			keep = append(keep, kept{got, bytes.Clone(want)})
		}
		for n, k := range keep {
			if !bytes.Equal(k.got, k.want) {
				t.Fatalf("kept packet %d changed after later reads", n)
			}
			releasePacket(k.got)
		}
	})
}
