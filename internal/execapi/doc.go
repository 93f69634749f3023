// Package execapi serves the gateway's executions API (/v1/executions…,
// /v1/restores, /v1/checkpoints…) over an ExecutionHost, and makes every
// execution a host: Agents starts `agent serve --stdio --mux --keys-stdin` inside each
// execution over a Docker exec attachment, hands it a fresh host key, the
// gateway's CA key and the host id on that stdin, pins the key in the
// gateway's store and registers the attachment's yamux session as the
// host's tunnel, so /v1/hosts/{executionId}/ssh reaches the container.
//
// Agents.Runner (dockerhost.Docker.SetExecVia) runs the API's commands
// through that tunnel: one gateway SSH connection per live tunnel,
// authenticated with a CA certificate for the execution id and pinning its
// host key, each command one session whose `sh -c` script (commandScript)
// rebuilds what docker exec would do: the container's environment (read
// once from /proc/1/environ) plus the command's, the cwd, the PATH lookup
// and runc's exit 126 messages; a signal's death is 128+N. The agent is
// told to leave a command's background processes running when it exits
// (StdioKeys.LeaveBackground), as docker exec does. At most
// maxTunnelCommands (the agent's own bound of sessions) run through one
// tunnel at once; the rest, and every command while the tunnel is down, go
// through docker exec. A command the agent refuses to start (it could not
// fork its shell: the sandbox's pids limit or memory is spent) answers
// docker exec's 126 at once.
package execapi
