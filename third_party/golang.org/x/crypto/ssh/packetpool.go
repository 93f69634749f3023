// Copyright 2026 The hostgate Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import "sync"

// hostgate: this file is not in upstream x/crypto. See HOSTGATE.md.

// dataPacketCap is the size of a recycled packet buffer: the largest
// channel data packet a peer may send us (our advertised maximum payload,
// channelMaxPacket, behind an extended-data header). The allocator rounds
// it up to 40 KiB.
const dataPacketCap = channelMaxPacket + 13

// minPooledPacket is the smallest packet given a recycled buffer. A
// channel's buffer may hold a whole window of unread packets, so a small
// packet in a 40 KiB buffer would multiply what a slow reader pins: from
// 24 KiB the most is 1.7 times the bytes held (a peer streaming full 32 KiB
// packets, as Go's and OpenSSH's senders do, 1.25 times). Smaller
// packets get an exact allocation, as upstream.
const minPooledPacket = 24 << 10

// dataPackets holds buffers for received channel data; see newPacket.
// Arrays, not slices, so that giving one back allocates nothing.
var dataPackets = sync.Pool{New: func() any { return new([dataPacketCap]byte) }}

// newPacket returns a buffer of len(packet) bytes to copy a received
// packet into. Channel data of minPooledPacket bytes or more gets a
// recycled one: the mux hands data packets to a channel's buffer, which
// owns them from then on and gives them back (releasePacket) once read.
// Every other packet, which decoders may keep slices of, gets a new
// allocation.
func newPacket(packet []byte) []byte {
	n := len(packet)
	if n >= minPooledPacket && n <= dataPacketCap && (packet[0] == msgChannelData || packet[0] == msgChannelExtendedData) {
		return dataPackets.Get().(*[dataPacketCap]byte)[:n]
	}
	return make([]byte, n)
}

// releasePacket gives a data packet's buffer back to dataPackets. The
// caller must hold the only reference to it.
func releasePacket(p []byte) {
	if cap(p) != dataPacketCap {
		return
	}
	dataPackets.Put((*[dataPacketCap]byte)(p[:dataPacketCap]))
}
