// Copyright 2026 The hostgate Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import "sync"

// hostgate: this file is not in upstream x/crypto. See HOSTGATE.md.

// dataPacketCap is the size of a recycled packet buffer: the largest
// channel data packet a peer may send us (our advertised maximum payload,
// channelMaxPacket, behind an extended-data header).
const dataPacketCap = channelMaxPacket + 13

// minPooledPacket is the smallest packet worth a recycled buffer: below
// it an exact allocation costs less than holding 32 KiB.
const minPooledPacket = 4 << 10

// dataPackets holds buffers for received channel data; see newPacket.
var dataPackets = sync.Pool{New: func() any {
	b := make([]byte, dataPacketCap)
	return &b
}}

// newPacket returns a buffer of len(packet) bytes to copy a received
// packet into. Channel data of minPooledPacket bytes or more gets a
// recycled one: the mux hands data packets to a channel's buffer, which
// owns them from then on and gives them back (releasePacket) once read.
// Every other packet, which decoders may keep slices of, gets a new
// allocation.
func newPacket(packet []byte) []byte {
	n := len(packet)
	if n >= minPooledPacket && n <= dataPacketCap && (packet[0] == msgChannelData || packet[0] == msgChannelExtendedData) {
		return (*dataPackets.Get().(*[]byte))[:n]
	}
	return make([]byte, n)
}

// releasePacket gives a data packet's buffer back to dataPackets. The
// caller must hold the only reference to it.
func releasePacket(p []byte) {
	if cap(p) != dataPacketCap {
		return
	}
	p = p[:dataPacketCap]
	dataPackets.Put(&p)
}
