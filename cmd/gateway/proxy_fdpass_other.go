//go:build !unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// proxyFdpass: OpenSSH's ProxyUseFdpass passes descriptors over a Unix
// socket, which Windows' ssh does not do.
func proxyFdpass(_ context.Context, _, stderr io.Writer, _, _, _ string, _ proxyOptions) error {
	err := errors.New("proxy: --fdpass needs OpenSSH's ProxyUseFdpass, which passes a descriptor over a Unix socket: not on this system; leave --fdpass out")
	fmt.Fprintln(stderr, "gateway:", err)
	return reportedError{err}
}
