package main

import (
	"fmt"
	"net/http"

	"github.com/hostgate/hostgate/internal/execroutes"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/store"
)

// executionsAuthorizer is the executions API's check: an admin token.
func executionsAuthorizer(srv *gateway.Server) func(w http.ResponseWriter, r *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		tok, ok := srv.AuthenticateRequest(w, r)
		if !ok {
			return false
		}
		if tok.Role != store.RoleAdmin {
			gateway.WriteError(w, http.StatusForbidden, "forbidden", "the executions API needs an admin token")
			return false
		}
		return true
	}
}

// serveExecutionsOff is every gateway without Docker executions (--docker
// off, no engine under auto, a build for a system without Docker
// executions): the executions API's routes answer an admin 404
// docker_off, and /v1/me tells an admin Docker is off.
func serveExecutionsOff(srv *gateway.Server) {
	execroutes.RegisterOff(srv.Mux(), executionsAuthorizer(srv))
	srv.SetMeFields(func(_ *http.Request, tok store.Token) map[string]any {
		if tok.Role != store.RoleAdmin {
			return nil
		}
		return map[string]any{"docker": false}
	})
}

// refuseExecutionFlags refuses the flags that only Docker executions use,
// for a build on goos, which has none: ignored, they would promise
// checkpoint retention nothing carries out.
func refuseExecutionFlags(c *serveConfig, goos string) error {
	why := "Docker executions (and their checkpoints) need a Unix gateway, not " + goos
	if c.Docker == "on" {
		return fmt.Errorf("serve: --docker on: %s; use --docker off", why)
	}
	return refuseCheckpointFlags(c, why, "leave it unset")
}

// refuseCheckpointFlags refuses the checkpoint retention flags, saying
// why (this gateway keeps no checkpoints) and what to do instead. A
// Unix gateway with --docker off calls it too: it would otherwise start,
// sweep nothing, and let an operator believe the disk was being kept.
func refuseCheckpointFlags(c *serveConfig, why, fix string) error {
	switch {
	case c.CheckpointMaxAge != 0:
		return fmt.Errorf("serve: --checkpoint-max-age (HOSTGATE_CHECKPOINT_MAX_AGE) %v: %s; %s", c.CheckpointMaxAge, why, fix)
	case c.CheckpointMaxBytes != 0:
		return fmt.Errorf("serve: --checkpoint-max-bytes (HOSTGATE_CHECKPOINT_MAX_BYTES) %d: %s; %s", int64(c.CheckpointMaxBytes), why, fix)
	}
	return nil
}

// refuseCheckpointFlagsOff is refuseCheckpointFlags for --docker off.
func refuseCheckpointFlagsOff(c *serveConfig) error {
	if c.Docker != "off" {
		return nil
	}
	return refuseCheckpointFlags(c, "--docker off keeps no Docker executions, so no checkpoints to retain",
		"leave it unset, or serve with --docker auto or on")
}
