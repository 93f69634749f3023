//go:build linux

package bicopy

import "github.com/hostgate/hostgate/internal/rawio"

// newRawTCP returns x's raw reader and writer (internal/rawio says why:
// a forward's 256 KiB writes to loopback outlast sysmon's 20 µs tick, as
// the WebSocket's do), or nil where x is no *net.TCPConn. Its waits are
// in the netpoller and keep the conn's deadlines.
func newRawTCP(x any) *rawio.TCPConn { return rawio.Raw(x) }
