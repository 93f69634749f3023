package dockerhost

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// SandboxStack is the soft stack rlimit of a sandbox's processes, set at
// create (the hard one stays unlimited, as the engine gave it): Linux
// sizes what one execve may carry of arguments and environment from it
// (argSpace), and the gateway, which did not set it, could not know how
// much a command may pass. It is the usual default, so programs see the
// stack they did.
const SandboxStack = 8 << 20

// argSpace is how many bytes an execve in a sandbox may take for its
// path, arguments and environment: Linux's rule (fs/exec.c,
// bprm_stack_limits, since 6.x byte for byte): a quarter of the soft
// stack rlimit, at most three quarters of _STK_LIM (8 MiB), at least
// ARG_MAX's 32 pages; each string counts with its NUL, and each argument
// and variable a pointer (execveBytes). 2 MiB with SandboxStack.
func argSpace() int {
	return max(min(SandboxStack/4, (8<<20)/4*3), 32*os.Getpagesize())
}

// execveBytes is what execve(path, argv, env) takes of argSpace: path,
// then every string of env and argv, each with its NUL, and a pointer
// for each string of argv (at least one) and env.
func execveBytes(path string, argv, env []string) int {
	n := len(path) + 1
	for _, s := range argv {
		n += len(s) + 1
	}
	for _, s := range env {
		n += len(s) + 1
	}
	return n + 8*(max(len(argv), 1)+len(env))
}

// execEnv is the environment docker exec gives a command in a container
// whose configured environment is cfgEnv and host name hostname, with
// the command's env: the engine's PATH and HOSTNAME with cfgEnv over
// them (moby's CreateDaemonEnvironment), then env over that, each step
// moby's replaceOrAppendEnv; then the runtime keeps a repeated name's
// last value (seen: a Config.Env of A=1, B=2, A=3 gives A=3 alone), and
// runc sets HOME when nothing did.
func execEnv(cfgEnv []string, hostname string, env map[string]string) []string {
	out := replaceOrAppendEnv([]string{"PATH=" + defaultPath, "HOSTNAME=" + hostname}, cfgEnv)
	out = replaceOrAppendEnv(out, envList(env))
	at := make(map[string]int, len(out))
	kept := out[:0]
	for _, kv := range out {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := at[k]; ok {
			kept[i] = kv
			continue
		}
		at[k] = len(kept)
		kept = append(kept, kv)
	}
	out = kept
	if _, ok := at["HOME"]; !ok {
		// runc sets HOME from the image's passwd when nothing does.
		out = append(out, "HOME=/nonexistent")
	}
	return out
}

// replaceOrAppendEnv is moby's ReplaceOrAppendEnvValues
// (container/env.go): an override replaces the entry of defaults of its
// name or is appended, and a name without "=" removes that entry of
// defaults (PATH or HOSTNAME, for a container's own environment) and is
// otherwise nothing. An image's environment is whatever its maker wrote:
// with "BIG=…" then "BIG", the engine keeps BIG=…, where a bare "BIG"
// taken as replacing it counted 1.5 MB as 12 bytes and let through a
// command the kernel then refused.
func replaceOrAppendEnv(defaults, overrides []string) []string {
	out := slices.Clone(defaults)
	at := make(map[string]int, len(out))
	for i, e := range out {
		k, _, _ := strings.Cut(e, "=")
		at[k] = i
	}
	for _, kv := range overrides {
		k, _, set := strings.Cut(kv, "=")
		i, ok := at[k]
		switch {
		case ok && set:
			out[i] = kv
		case ok:
			out[i] = "" // removed below
		case set:
			out = append(out, kv)
		}
	}
	return slices.DeleteFunc(out, func(e string) bool { return e == "" })
}

// checkArgSpace refuses a command that docker exec could not start in
// e's container: its shell's argv (shellArgv) with the environment over
// argSpace. It answered 200 with exit code 1 and "exec /bin/sh: argument
// list too long" on stderr, as if it had run and failed. The container's
// own environment (the image's and the provision's) is counted exactly
// for every command, from what was read of it once (containerEnv): an
// image whose environment alone took 1.65 MB left a command of 500 KB
// no room, and the engine was asked only for commands over 512 KiB. The
// agent tunnel starts a command with less (no shell script of docker
// exec's in its argv), so what passes here runs either way.
func (h *Docker) checkArgSpace(ctx context.Context, e *execution, req *ExecRequest) error {
	argv := shellArgv(append([]string{req.Command}, req.Args...), req.Cwd, req.Env)
	ce, err := h.containerEnv(ctx, e)
	if err != nil {
		if execveBytes(argv[0], argv, envList(req.Env)) <= argSpace()/4 {
			// The engine did not answer (its read at provision failed
			// too): a command of its size ran before anything was read.
			return nil
		}
		return err
	}
	if !ce.stack {
		// A container made before sandboxes got their stack limit
		// (adopted after an upgrade) has the engine's, which the gateway
		// does not know: the kernel answers for it, as it did then.
		return nil
	}
	n := execveBytes(argv[0], argv, nil) + ce.bytesWith(req.Env)
	if n <= argSpace() {
		return nil
	}
	return invalid("args", "with the environment and the shell that starts them, the command's words take %d bytes, over the %d a program's arguments and environment may hold in a sandbox (Linux: a quarter of its %d MiB stack limit, each string with its NUL and a pointer); pass large data on stdin or in a file (SFTP)",
		n, argSpace(), SandboxStack>>20)
}

// containerEnv is what a container's own environment takes of argSpace
// in every command docker exec starts there, read from the engine once
// (readContainerEnv), and whether it was made with SandboxStack.
type containerEnv struct {
	stack bool
	// bytes is what execEnv(its env, its hostname, nil) takes: each
	// NAME=value with its NUL and a pointer; names is each entry's share,
	// which a command's variable of the same name replaces.
	bytes int
	names map[string]int
}

// readContainerEnv reads what the container's environment takes from its
// inspection.
func readContainerEnv(info container.InspectResponse) *containerEnv {
	ce := &containerEnv{names: map[string]int{}}
	if info.ContainerJSONBase != nil {
		ce.stack = stackSet(info.HostConfig)
	}
	var cfgEnv []string
	var hostname string
	if info.Config != nil {
		cfgEnv, hostname = info.Config.Env, info.Config.Hostname
	}
	for _, kv := range execEnv(cfgEnv, hostname, nil) {
		k, _, _ := strings.Cut(kv, "=")
		n := len(kv) + 1 + 8
		ce.bytes += n - ce.names[k]
		ce.names[k] = n
	}
	return ce
}

// bytesWith is what the environment of a command given env takes, as
// execEnv(its env, its hostname, env) would: execveBytes' share of it.
func (ce *containerEnv) bytesWith(env map[string]string) int {
	n := ce.bytes
	for k, v := range env {
		n += len(k) + 1 + len(v) + 1 + 8 - ce.names[k]
	}
	return n
}

// rootEnv is the environment of a command the host runs as uid 0 in the
// container (SetTimeout's): ownEnv, with every other name of the
// container's own environment unset (a name without "=", moby's
// ReplaceOrAppendEnvValues). That environment holds the provision env,
// and a loader variable in it (LD_PRELOAD, LD_LIBRARY_PATH) naming a file
// of the workspace had a dynamically linked /bin/sh load the sandbox's
// code as uid 0, which may write what no sandbox process may (the
// in-container deadline's extension).
func (ce *containerEnv) rootEnv() []string {
	env := slices.Clone(ownEnv)
	for k := range ce.names {
		if k != "PATH" {
			env = append(env, k)
		}
	}
	slices.Sort(env[len(ownEnv):])
	return env
}

// containerEnv is e's, read once: at provision (a fresh container's
// inspection, a pooled one's claim) or adoption, or here by the first
// command when that read failed.
func (h *Docker) containerEnv(ctx context.Context, e *execution) (*containerEnv, error) {
	if ce := e.cenv.Load(); ce != nil {
		return ce, nil
	}
	info, err := h.api.ContainerInspect(ctx, e.ContainerID)
	if err != nil {
		return nil, fmt.Errorf("dockerhost: inspect container for its environment: %w", err)
	}
	ce := readContainerEnv(info)
	e.cenv.Store(ce)
	return ce, nil
}

// envSpace refuses a provision env that takes over half of argSpace as
// every process of the sandbox gets it (with the variables provisionEnv
// adds): its container could not start (its main process got E2BIG, and
// the caller "the container ended during provisioning … runtimeMs or
// memoryBytes too small?"), or its commands had next to no room left
// for their arguments. Half is a bound no real environment nears.
func (p *Policy) envSpace(env map[string]string) error {
	n := 0
	for _, kv := range envList(p.provisionEnv(env)) {
		n += len(kv) + 1 + 8
	}
	if n > argSpace()/2 {
		return invalid("env", "takes %d bytes in every process of the sandbox (each NAME=value with its NUL and a pointer), over the %d it may have, half of what a program's arguments and environment may hold there (Linux: a quarter of the %d MiB stack limit); put large values in a file in the workspace",
			n, argSpace()/2, SandboxStack>>20)
	}
	return nil
}

// stackSet reports whether a container runs with SandboxStack as its soft
// stack limit, as the gateway creates sandboxes since it set one.
func stackSet(hc *container.HostConfig) bool {
	if hc == nil {
		return false
	}
	for _, u := range hc.Ulimits {
		if u != nil && u.Name == "stack" {
			return u.Soft == SandboxStack
		}
	}
	return false
}

// imageInspector is the engine's image inspection, which *client.Client
// has and the DockerAPI seam does not require.
type imageInspector interface {
	ImageInspect(ctx context.Context, imageID string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
}

// imageEnvSpace refuses, naming image, a container config whose image's
// environment, with the provision's, leaves its main process no room to
// start (over argSpace): its container ended at start, answered "the
// container ended during provisioning (status 1; runtimeMs or
// memoryBytes too small?)" as the engine's failure, when no program
// could ever start in it. Asked only once a container has ended so: the
// engine is not asked of every image.
func (h *Docker) imageEnvSpace(ctx context.Context, cfg *container.Config) error {
	ii, ok := h.api.(imageInspector)
	if !ok {
		return nil
	}
	ins, err := ii.ImageInspect(ctx, cfg.Image)
	if err != nil || ins.Config == nil {
		return nil
	}
	env := map[string]string{}
	for _, kv := range cfg.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	argv := append(slices.Clone([]string(cfg.Entrypoint)), cfg.Cmd...)
	if len(argv) == 0 {
		return nil
	}
	// The engine names the host after the container's id, 12 characters.
	n := execveBytes(argv[0], argv, execEnv(ins.Config.Env, strings.Repeat("h", 12), env))
	if n <= argSpace() {
		return nil
	}
	own := 0
	for _, kv := range ins.Config.Env {
		own += len(kv) + 1 + 8
	}
	return invalid("image", "its environment takes %d bytes (each NAME=value with its NUL and a pointer), and with the provision's and the sandbox's start %d, over the %d a program's arguments and environment may hold in a sandbox (Linux: a quarter of its %d MiB stack limit): no program can start in it; use an image with a smaller environment (ENV), large values in files",
		own, n, argSpace(), SandboxStack>>20)
}
