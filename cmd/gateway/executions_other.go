//go:build !unix

package main

import (
	"context"
	"runtime"
)

// Docker executions (dockerhost, the in-container agent) and `gateway dev`
// need a Unix gateway. Elsewhere (Windows) the binary is for OpenSSH's
// ProxyCommand (`gateway proxy`, `gateway cert`) and the admin commands;
// `serve` runs as a Unix gateway with --docker off does, and the flags
// that only executions use are refused (serveConfig.validate).
func init() { serveHooks = append(serveHooks, executionsOff) }

// executionsBuilt says this build serves Docker executions.
const executionsBuilt = false

func executionsOff(_ context.Context, s *serving) (func(), error) {
	s.Logger.Info("Docker executions off", "reason", "not supported on "+runtime.GOOS)
	serveExecutionsOff(s.Server, "it runs on "+runtime.GOOS+", and they need a Unix gateway")
	return nil, nil
}
