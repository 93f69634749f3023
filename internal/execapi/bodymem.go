package execapi

import (
	"errors"
	"io"
	"sync/atomic"
)

// Exec bodies' memory. Each exec request holds its body's stdin until its
// command ends, and decoding it costs more: forty exec requests with 8 MiB
// of stdin each, for a command that never read it, took the gateway from
// 49 MB to 987 MB of RSS (23 MiB each), so enough of them at once would
// have had it OOM-killed.
const (
	// ExecBodyMemory is what all exec bodies in flight may cost together.
	ExecBodyMemory = 256 << 20
	// execBodyCost is what a body byte costs until its command ends: the
	// JSON decoder's buffer, which grows by doubling, and the stdin
	// decoded from it (measured: 23 MiB for 8 MiB).
	execBodyCost = 3
	// execBodyFree is the part of each body not counted, as small as
	// any other request's body (MaxBody): small commands never wait on
	// large ones.
	execBodyFree = MaxBody
)

// errBodyMemory means the exec bodies in flight hold ExecBodyMemory.
var errBodyMemory = errors.New("execapi: exec requests hold the gateway's memory for them")

// bodyMemory is the gateway-wide count of exec body memory.
type bodyMemory struct {
	limit int64
	used  atomic.Int64
}

// heldBody reads an exec request's body, counting its bytes past
// execBodyFree in mem until release. A read that would pass the limit
// fails with errBodyMemory: the caller is told to retry rather than made
// to wait with its body half sent.
type heldBody struct {
	io.ReadCloser
	mem  *bodyMemory
	read int64
	held int64
}

func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if cost := (b.read - execBodyFree) * execBodyCost; cost > b.held {
		more := cost - b.held
		if b.mem.used.Add(more) > b.mem.limit {
			b.mem.used.Add(-more)
			return 0, errBodyMemory
		}
		b.held = cost
	}
	return n, err
}

// release gives back what the body held.
func (b *heldBody) release() {
	b.mem.used.Add(-b.held)
	b.held = 0
}
