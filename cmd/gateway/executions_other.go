//go:build !unix

package main

import (
	"context"
	"fmt"
	"runtime"
)

// Docker executions (dockerhost, the in-container agent) and `gateway dev`
// need a Unix gateway. Elsewhere (Windows) the binary is for OpenSSH's
// ProxyCommand (`gateway proxy`, `gateway cert`) and the admin commands;
// `serve` runs without executions, and --docker on says why.
func init() { serveHooks = append(serveHooks, refuseExecutions) }

func refuseExecutions(_ context.Context, s *serving) (func(), error) {
	if s.Config.Docker == "on" {
		return nil, fmt.Errorf("serve: --docker on: Docker executions need a Unix gateway, not %s; use --docker off", runtime.GOOS)
	}
	s.Logger.Info("Docker executions off", "reason", "not supported on "+runtime.GOOS)
	return nil, nil
}
