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
//
// SetExecVia lets Exec run commands through another CommandRunner — the
// execution's agent tunnel (internal/execapi), a few ms instead of a Docker
// exec create/attach/inspect — with the same lock, timeout, output limit,
// destroy and error codes; a runner that cannot start a command falls back
// to docker exec, and one that loses a started command (its agent died)
// answers agent_lost, leaving the execution be. PoolConfig.Agent
// pre-starts that agent in warm containers, handed to the claiming
// execution once.
//
// Ended executions answer gone rather than not_found, saying when and why
// they ended (Error.Reason, Error.EndedAt), and a provision that names an
// ended id is refused (conflict): ids are not reused. That holds for the
// last 4096 in memory, and for all of them across restarts with
// Config.Tombstones (the gateway's state store, which keeps the newest
// 100,000).
//
// An optional warm pool (Config.Pool) keeps pre-created containers per key
// (image, network and the resources the container enforces: cpus, memory,
// disk, pids; the user and tools are the host's). The runtime and the
// output limit are not in the key: the claim starts one and the host
// enforces both, so one warm container serves any of them. A pooled
// container is started and image-checked ahead of time; its main process
// blocks reading stdin, which the pool holds attached, so the runtime
// deadline starts only when a claim writes it. A claim also renames the
// container to
// hostgate-<executionId>--<expires unix>.<runtimeMs>.<maxOutputBytes>
// (labels cannot change after create), which is how Adopt recognises a
// claimed pooled container after a restart, with its limits; unclaimed
// pooled containers of the owner that this host does not hold are reaped by
// Adopt, and they end by themselves when the holding process dies (stdin
// EOF). Provision env is applied to each exec of a pooled container (it was
// created without it); that env is kept in memory only, so an execution
// adopted after a restart no longer has it for execs that do not pass it
// again.
package dockerhost
