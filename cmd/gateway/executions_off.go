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
	switch {
	case c.Docker == "on":
		return fmt.Errorf("serve: --docker on: %s; use --docker off", why)
	case c.CheckpointMaxAge != 0:
		return fmt.Errorf("serve: --checkpoint-max-age (HOSTGATE_CHECKPOINT_MAX_AGE) %v: %s; leave it unset", c.CheckpointMaxAge, why)
	case c.CheckpointMaxBytes != 0:
		return fmt.Errorf("serve: --checkpoint-max-bytes (HOSTGATE_CHECKPOINT_MAX_BYTES) %d: %s; leave it unset", int64(c.CheckpointMaxBytes), why)
	}
	return nil
}
