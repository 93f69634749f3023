// Copyright 2026 The hostgate Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"encoding/binary"
	"errors"
)

// hostgate: this file is not in upstream x/crypto. See HOSTGATE.md,
// change 26.
//
// Early requests let an opener send a channel's requests before the peer
// has answered the open, as early data (earlydata.go) lets it send bytes:
// a session's "exec" then travels right behind its open, and a command on
// a channel of its own costs one round trip where the open's answer and
// then the request's took two. The opener sends each as
// msgChannelEarlyRequest, a channel request's fields under its own
// channel id; the peer queues it on the channel, where whoever accepts it
// reads it first, and drops it with a rejected one. The peer answers it
// after its confirmation, so the reply finds the channel established.

// maxEarlyRequests bounds the requests one channel may send before its
// answer: a session's few (pty-req, env, exec or shell or subsystem),
// and under chanSize, so that queueing them on a channel nobody has
// accepted yet never blocks the mux goroutine.
const maxEarlyRequests = 8

// NewSessionEarly is NewSession returning before the server has answered
// the open: the session's requests (Start, Run, RequestSubsystem, ...)
// and its first stdin bytes (up to 32 KiB) go out at once behind it, and
// a refused open is the error of the first request that waits for a
// reply (an *OpenChannelError; ErrOpenUnanswered when the connection
// ended first). Use it only with a server that handles early requests and
// early data; a hostgate server says so in its version.
func (c *Client) NewSessionEarly() (*Session, error) {
	return c.newSessionEarly(0)
}

// NewSessionEarlyWindow is NewSessionEarly granting the server n bytes (at
// least one packet) of the session's output before this side reads, as
// NewSessionWindow does: a terminal's pty-req and shell go with its open.
func (c *Client) NewSessionEarlyWindow(n uint32) (*Session, error) {
	return c.newSessionEarly(max(n, channelMaxPacket))
}

func (c *Client) newSessionEarly(window uint32) (*Session, error) {
	conn, ok := c.Conn.(*connection)
	if !ok {
		if window != 0 {
			return c.NewSessionWindow(window)
		}
		return c.NewSession()
	}
	ch, err := conn.mux.openChannelEarlyWindow("session", nil, window)
	if err != nil {
		return nil, err
	}
	ch.earlyRequests = true
	return newSession(ch, ch.incomingRequests)
}

// takesEarlyRequest reports whether a request on ch goes early: an early
// channel that may send them and has no answer yet.
func (ch *channel) takesEarlyRequest() bool {
	return ch.early && ch.earlyRequests && !ch.established.Load()
}

// sendEarlyRequest sends msg as an early request. The open held back for
// early data goes with it; whatever the request waits for, the answer
// comes first.
func (ch *channel) sendEarlyRequest(msg channelRequestMsg) error {
	p := Marshal(msg)
	p[0] = msgChannelEarlyRequest
	binary.BigEndian.PutUint32(p[1:], ch.localId)
	return ch.writePacket(p)
}

// handleEarlyRequest takes an early request for an inbound channel; the
// peer names it by its own id. A request for a channel no longer there
// (rejected, or closed) is dropped, as its opener learns from the answer.
func (m *mux) handleEarlyRequest(packet []byte) error {
	if len(packet) < 5 {
		return parseError(packet[0])
	}
	ch := m.chanList.getRemote(binary.BigEndian.Uint32(packet[1:]))
	if ch == nil {
		return nil
	}
	var msg channelRequestMsg
	packet[0] = msgChannelRequest
	if err := Unmarshal(packet, &msg); err != nil {
		return err
	}
	if ch.earlyReqIn++; ch.earlyReqIn > maxEarlyRequests {
		return errors.New("ssh: peer sent more early requests than allowed")
	}
	// Queued before Accept, it is read once the channel is accepted; at
	// most maxEarlyRequests of them, and nothing else is queued on a
	// channel not accepted yet (handlePacket drops it), so this send
	// does not block then, and after Accept it blocks as any request's.
	ch.incomingRequests <- &Request{
		Type:      msg.Request,
		WantReply: msg.WantReply,
		Payload:   msg.RequestSpecificData,
		ch:        ch,
	}
	ch.startDiscards(true, false)
	return nil
}
