package yamux

import "sync/atomic"

// hostgate: RecvBudget bounds what the streams of every session that
// shares it (Config.RecvBudget) may make this side hold unread. A stream
// grants its peer window beyond the protocol's initial 256 KiB only out of
// the budget, and gives it back as its reader consumes the bytes and at its
// end; so the bytes held unread stay under the budget plus 256 KiB per
// open stream, whatever the peers send and however slowly the streams are
// read. When the budget is spent a stream whose reader consumes gets its
// window back (it keeps its share) while one that holds the most gets no
// more: backpressure on the peer's writes, never a dropped byte or a cut
// stream.
type RecvBudget struct {
	limit    int64
	reserved atomic.Int64 // window granted beyond the initial one
	held     atomic.Int64 // bytes received and not yet read
}

// NewRecvBudget returns a budget of limit bytes.
func NewRecvBudget(limit int64) *RecvBudget { return &RecvBudget{limit: limit} }

// Held is the bytes the budget's streams hold unread.
func (b *RecvBudget) Held() int64 { return b.held.Load() }

// Reserved is the window the budget's streams have granted beyond yamux's
// initial one: what their peers may still send on top of 256 KiB each.
func (b *RecvBudget) Reserved() int64 { return b.reserved.Load() }

// take reserves up to n bytes and returns how many it got.
func (b *RecvBudget) take(n uint32) uint32 {
	for {
		used := b.reserved.Load()
		free := b.limit - used
		if free <= 0 {
			return 0
		}
		got := int64(n)
		if got > free {
			got = free
		}
		if b.reserved.CompareAndSwap(used, used+got) {
			return uint32(got)
		}
	}
}

func (b *RecvBudget) give(n uint32) {
	if n > 0 {
		b.reserved.Add(-int64(n))
	}
}

// budgetWindow is the window a stream of a budgeted session may grant:
// the initial window, plus its share of the budget topped up towards its
// goal. The goal starts at the initial window and doubles, up to full,
// each time the peer has sent and the reader has read more than half of
// it, so only a stream that carries bulk data reserves more: a session
// that sends a prompt now and then (most of a gateway's) reserves
// nothing, and cannot starve newer ones of the budget by holding a window
// its peer never uses, which the protocol gives no way to take back.
// Called with recvLock held.
func (s *Stream) budgetWindow(b *RecvBudget, full, bufLen uint32) uint32 {
	if s.budgetDone {
		return bufLen + s.recvWindow // the stream has ended: grant nothing
	}
	s.budgetTrim(b, bufLen)
	goal := initialStreamWindow + s.budgetGoal
	if out := bufLen + s.recvWindow; out <= goal/2 && goal < full {
		s.budgetGoal = min(2*goal, full) - initialStreamWindow
	}
	if s.budgetRes < s.budgetGoal {
		s.budgetRes += b.take(s.budgetGoal - s.budgetRes)
	}
	return initialStreamWindow + s.budgetRes
}

// budgetIdle sets a stream that received nothing since the last call back
// to the initial window's goal: what it still reserves comes back as its
// peer uses the window, and a new burst grows it again. Called with
// recvLock held, by Shrink.
func (s *Stream) budgetIdle() {
	if !s.budgetRecent {
		s.budgetGoal = 0
	}
	s.budgetRecent = false
}

// budgetTrim gives back the part of a stream's reservation that its
// granted window no longer needs: what the peer may still send plus what
// is held must stay covered; the rest its reader has freed, or an update
// that was not sent did not grant. Called with recvLock held.
func (s *Stream) budgetTrim(b *RecvBudget, bufLen uint32) {
	out := bufLen + s.recvWindow
	var need uint32
	if out > initialStreamWindow {
		need = out - initialStreamWindow
	}
	if s.budgetRes > need {
		b.give(s.budgetRes - need)
		s.budgetRes = need
	}
}

// budgetRelease gives back a stream's reservation and stops counting its
// bytes, at its end. Idempotent.
func (s *Stream) budgetRelease() {
	b := s.session.config.RecvBudget
	if b == nil {
		return
	}
	s.recvLock.Lock()
	defer s.recvLock.Unlock()
	if s.budgetDone {
		return
	}
	s.budgetDone = true
	b.give(s.budgetRes)
	s.budgetRes = 0
	if s.recvBuf != nil {
		b.held.Add(-int64(s.recvBuf.Len()))
	}
}
