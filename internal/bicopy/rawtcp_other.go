//go:build !linux

package bicopy

// rawTCP is Linux's (rawtcp_linux.go); elsewhere copies use the conn's
// own Read and Write.
type rawTCP struct{}

func newRawTCP(any) *rawTCP { return nil }

func (*rawTCP) Read([]byte) (int, error)  { panic("bicopy: no raw reads here") }
func (*rawTCP) Write([]byte) (int, error) { panic("bicopy: no raw writes here") }
