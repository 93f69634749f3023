//go:build !unix

package hostgate

import (
	"os"
	"time"
)

// setLinkTime leaves a link the time it is made where there is no
// utimensat to reach it without following it.
func setLinkTime(root *os.Root, name string, mtime time.Time) error { return nil }
