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
			srv.Forbid(w, "the executions API needs an admin token")
			return false
		}
		return true
	}
}

// serveExecutionsOff is every gateway without Docker executions (--docker
// off, no engine under auto, a build for a system without Docker
// executions): the executions API's routes answer an admin 404
// docker_off saying why and what turns them on, and /v1/me tells an
// admin Docker is off.
func serveExecutionsOff(srv *gateway.Server, why string) {
	execroutes.RegisterOffWhy(srv.Mux(), executionsAuthorizer(srv), why)
	srv.SetMeFields(func(_ *http.Request, tok store.Token) map[string]any {
		if tok.Role != store.RoleAdmin {
			return nil
		}
		return map[string]any{"docker": false}
	})
}

// refuseExecutionFlags refuses the flags that only Docker executions use,
// for a build on goos, which has none: ignored, they would promise
// sandboxes, a warm pool or checkpoint retention nothing carries out.
func refuseExecutionFlags(c *serveConfig, goos string) error {
	why := "Docker executions (and their checkpoints) need a Unix gateway, not " + goos
	if c.Docker == "on" {
		return fmt.Errorf("serve: --docker on: %s; use --docker off", why)
	}
	return refuseDockerFlags(c, why, "leave it unset")
}

// refuseDockerFlags refuses each flag that only Docker executions read,
// saying why (this gateway runs none) and what to do instead. A Unix
// gateway with --docker off calls it too: it would otherwise start, keep
// no pool, sweep nothing, and let an operator believe it did.
func refuseDockerFlags(c *serveConfig, why, fix string) error {
	set := func(flag, env string, v any) error {
		return fmt.Errorf("serve: --%s (%s) %v: %s; %s", flag, env, v, why, fix)
	}
	switch {
	case c.CheckpointMaxAge != 0:
		return set("checkpoint-max-age", "HOSTGATE_CHECKPOINT_MAX_AGE", c.CheckpointMaxAge)
	case c.CheckpointMaxBytes != 0:
		return set("checkpoint-max-bytes", "HOSTGATE_CHECKPOINT_MAX_BYTES", int64(c.CheckpointMaxBytes))
	case c.sandboxMaxSet:
		return set("sandbox-max", "HOSTGATE_SANDBOX_MAX", c.SandboxMax)
	case c.SandboxPool != 0:
		return set("sandbox-pool", "HOSTGATE_SANDBOX_POOL", c.SandboxPool)
	case c.SandboxImage != "":
		return set("sandbox-image", "HOSTGATE_SANDBOX_IMAGE", c.SandboxImage)
	case c.AgentBinary != "":
		return set("agent-binary", "HOSTGATE_AGENT_BINARY", c.AgentBinary)
	case c.RepoRoots != "":
		return set("repository-roots", "HOSTGATE_REPOSITORY_ROOTS", c.RepoRoots)
	}
	return nil
}

// refuseDockerFlagsOff is refuseDockerFlags for --docker off.
func refuseDockerFlagsOff(c *serveConfig) error {
	if c.Docker != "off" {
		return nil
	}
	return refuseDockerFlags(c, "--docker off runs no Docker executions, so nothing reads it",
		"leave it unset, or serve with --docker auto or on")
}
