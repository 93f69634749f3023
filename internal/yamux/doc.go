// Package yamux is hostgate's copy of github.com/hashicorp/yamux v0.1.2
// (MPL-2.0, see LICENSE): the same wire protocol (spec.md) and API, with
// four additions, Config.WriteInCaller, Config.CloseEndsReads (a Close
// that ends both directions and buffers nothing more) and
// Config.OpenBacklog (unacknowledged opens bounded apart from the accept
// backlog), Config.ReadsBuffered (frames read straight from a connection
// that buffers, without a 4 KiB buffer of the session's own), a bound on the answers to a peer's pings waiting at once
// (upstream starts a goroutine per ping), a ring for a stream's unread
// bytes (recvring.go) instead of a bytes.Buffer, Session.AfterClose (a
// function run when the session ends, with no goroutine waiting for it),
// and AcceptStream on a
// closed session saying why it ended rather than handing out a stream
// still queued, and a Read or Write blocked on a session that shuts down
// returning then instead of spinning until Close marks its stream closed,
// and a stream the peer opens with an id of this side's (or 0) ending the
// session as a protocol error (upstream took it, and this side's next open
// replaced it in the session's table), and, with WriteInCaller, a write
// lock a stream's frame need not wait out while another stream's write is
// stuck on a full connection (a data frame gives up at its stream's write
// deadline, Close or the session's Close; a window update or FIN goes to
// the send loop), and OpenStreamContext (an open that gives up when its
// ctx ends while it waits for the open backlog or, with WriteInCaller,
// for another frame's write stuck on the connection, nothing of it
// sent; AcceptStreamWithContext's ctx bounds its acknowledgement's wait
// likewise, the peer's open then refused), and the receive loop queuing its refusal of a stream without
// holding the session's stream table, and PingContext (a ping that gives
// up when its ctx ends, its answer then ignored). Changes are marked
// "hostgate:" where they are made.
//
// Upstream hands every frame to a send goroutine and waits for its
// answer, and that goroutine copies the body before writing it: on the
// gateway's relay path, two goroutine hand-offs and a copy per frame, in
// each direction. With WriteInCaller a stream writes its own frames,
// under the session's write lock; bytestream turns it on, since its
// connection bounds every write with a watchdog. The send loop then runs
// only while session frames (pings, their answers, GoAway) wait, instead
// of for the session's life: an idle session holds one goroutine, its
// receive loop.
//
// The upstream tests run unchanged (send-loop mode); writeincaller_test.go
// runs the data-path tests again with WriteInCaller.
package yamux
