// Package dockerhost runs executions: hardened, resource-bounded Docker
// containers with a private tmpfs workspace, behind the ExecutionHost
// interface (provision, exec, checkpoint, restore, terminate).
//
// The Docker implementation keeps the seed's owners apart: Policy validates
// requests and builds the container configuration, ProcessRunner runs
// commands through the Docker exec API and enforces timeouts, cancellation
// and the output limit, Workspace moves git archives and checkpoint tars
// through exec'd tar (the archive API cannot see tmpfs contents,
// moby#22020), a CheckpointStore keeps checkpoints (a local directory by
// default; the seam for object storage), and Docker itself keeps only
// lifecycle and ownership.
package dockerhost
