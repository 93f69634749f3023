// Copyright 2026 The hostgate Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

// hostgate: this file is not in upstream x/crypto. See HOSTGATE.md,
// change 28.
//
// The mux hands global requests and channel opens over on two Go
// channels, so whoever reads both cannot tell which of a request and an
// open the peer sent first. A request that is about the opens around it
// (no-more-sessions@openssh.com binds only the sessions opened after it)
// needs that order: the mux numbers both as it reads them.

// Arrival is the place of a global request among the global requests and
// channel opens of its connection, counted from 1 in the order the mux
// read them. It is 0 for a channel's request, which has no place in that
// order, and for a Request the mux did not make.
func (r *Request) Arrival() uint64 {
	return r.arrival
}

// ChannelArrival is the place of nc among the global requests and channel
// opens of its connection, counted from 1 in the order the mux read them
// (Request.Arrival). It is 0 for a NewChannel the mux did not make.
func ChannelArrival(nc NewChannel) uint64 {
	if ch, ok := nc.(*channel); ok {
		return ch.arrival
	}
	return 0
}
