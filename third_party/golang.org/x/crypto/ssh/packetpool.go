// Copyright 2026 The hostgate Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"sync"
	"unsafe"
)

// hostgate: this file is not in upstream x/crypto. See HOSTGATE.md.

// packetArrayLen is the size of a recycled packet buffer: the allocator's
// size class for the largest channel data packet a peer may send us (our
// advertised maximum payload, channelMaxPacket, behind an extended-data
// header) with its padding-length byte and up to 255 bytes of padding, so
// that a packet can be decrypted straight into one.
const packetArrayLen = 40 << 10

// A recycled buffer holds a packet's payload from its second byte on: the
// first is where decryption puts the padding-length byte, which precedes
// the payload. A pooled packet is therefore recognised by its capacity.
const pooledPacketCap = packetArrayLen - 1

// minPooledPacket is the smallest packet given a recycled buffer. A
// channel's buffer may hold a whole window of unread packets, so a small
// packet in a 40 KiB buffer would multiply what a slow reader pins: from
// 24 KiB the most is 1.7 times the bytes held (a peer streaming full 32 KiB
// packets, as Go's and OpenSSH's senders do, 1.25 times). Smaller
// packets get an exact allocation, as upstream.
const minPooledPacket = 24 << 10

// dataPackets holds buffers for received channel data; see newPacket.
// Arrays, not slices, so that giving one back allocates nothing.
var dataPackets = sync.Pool{New: func() any { return new([packetArrayLen]byte) }}

// isChannelData reports whether packet is channel data big enough to keep
// in a recycled buffer.
func isChannelData(packet []byte) bool {
	n := len(packet)
	return n >= minPooledPacket && n <= pooledPacketCap && (packet[0] == msgChannelData || packet[0] == msgChannelExtendedData)
}

// newPacket returns a buffer of len(packet) bytes to copy a received
// packet into. Channel data of minPooledPacket bytes or more gets a
// recycled one: the mux hands data packets to a channel's buffer, which
// owns them from then on and gives them back (releasePacket) once read.
// Every other packet, which decoders may keep slices of, gets a new
// allocation.
func newPacket(packet []byte) []byte {
	if isChannelData(packet) {
		return getPacketArray()[1 : 1+len(packet)]
	}
	return make([]byte, len(packet))
}

// getPacketArray returns a recycled buffer; its packet starts at index 1.
func getPacketArray() *[packetArrayLen]byte {
	return dataPackets.Get().(*[packetArrayLen]byte)
}

// putPacketArray gives back a buffer that holds no packet anyone keeps.
func putPacketArray(arr *[packetArrayLen]byte) { dataPackets.Put(arr) }

// isPooled reports whether p, a channel data packet that readPacket
// returned, is in a recycled buffer. Every data packet of minPooledPacket
// to pooledPacketCap bytes is, and the others were allocated to their
// exact size, so only a recycled one has this capacity.
func isPooled(p []byte) bool { return cap(p) == pooledPacketCap }

// releasePacket gives a data packet's buffer back to dataPackets. The
// caller must hold the only reference to it.
func releasePacket(p []byte) {
	if !isPooled(p) {
		return
	}
	// The packet starts one byte into its array (see pooledPacketCap).
	putPacketArray((*[packetArrayLen]byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(p)), -1)))
}
