package agent

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/hostgate/hostgate/internal/gateway/wire"
)

// FuzzDirectControl: a gateway (or what claims to be one) writes anything
// on the control stream of direct sessions while connections 1 to 3 wait
// for its answer and 4 is live. The gate's reader never panics or blocks;
// each waiting connection gets at most one answer, and is live after it
// exactly when that answer admitted it; the stream's end ends every
// connection the gate admitted (its context), saying why.
func FuzzDirectControl(f *testing.F) {
	for _, s := range []string{
		`{"op":"admit","id":1}` + "\n" + `{"op":"end","id":1,"reason":"revoked"}` + "\n",
		`{"op":"refuse","id":2,"reason":"no"}` + "\n" + `{"op":"admit","id":2}` + "\n",
		`{"op":"admit","id":3}` + "\n" + `{"op":"admit","id":3}` + "\n" + `{"op":"end","id":4}` + "\n",
		`{"op":"open","id":9}` + "\n" + `{"op":"closed","id":1}` + "\n" + `{"op":"wat","id":1}` + "\n",
		`{"op":"admit","id":18446744073709551615}` + "\n" + `{"op":"end","id":0}` + "\n",
		"{\"op\":\"admit\",\"id\":1\n",
		"not json\n",
	} {
		f.Add([]byte(s), uint8(7))
	}
	f.Fuzz(func(t *testing.T, in []byte, cut uint8) {
		d := &directListener{log: slog.New(slog.DiscardHandler)}
		d.ctx, d.cancel = context.WithCancel(context.Background())
		defer d.cancel()
		g := d.newGate(nil, true, d.log)
		answers := map[uint64]chan wire.DirectMsg{}
		ended := map[uint64]context.Context{}
		for id := uint64(1); id <= 4; id++ {
			ctx, end := context.WithCancelCause(g.ctx)
			defer end(nil)
			ended[id] = ctx
			if id == 4 {
				g.live[id] = end
				continue
			}
			answers[id] = make(chan wire.DirectMsg, 1)
			g.waiting[id] = pending{answer: answers[id], end: end}
		}
		g.read(closableBytes{&bytesConn{b: in, n: int(cut)%64 + 1}})

		if context.Cause(g.ctx) == nil {
			t.Fatal("the control stream ended and the gate's connections did not")
		}
		for id, ctx := range ended {
			if cause := context.Cause(ctx); cause == nil || errors.Is(cause, context.Canceled) && cause.Error() == context.Canceled.Error() {
				t.Errorf("connection %d: ended with %v, want a reason", id, cause)
			}
		}
		for id, ch := range answers {
			var m wire.DirectMsg
			got := false
			select {
			case m = <-ch:
				got = true
			default:
			}
			_, waiting := g.waiting[id]
			_, live := g.live[id]
			switch {
			case got && (m.ID != id || m.Op != wire.DirectAdmit && m.Op != wire.DirectRefuse):
				t.Errorf("connection %d got %+v", id, m)
			case got == waiting:
				t.Errorf("connection %d: answered %v, still waiting %v", id, got, waiting)
			case live != (got && m.Op == wire.DirectAdmit):
				t.Errorf("connection %d: live %v after answer %+v", id, live, m)
			}
		}
	})
}

// closableBytes is a bytesConn whose Close does nothing.
type closableBytes struct{ *bytesConn }

func (closableBytes) Close() error { return nil }
