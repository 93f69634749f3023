package dockerhost

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/docker/docker/api/types/system"
)

// engineInfo is the engine's Info, which *client.Client has and the
// DockerAPI seam does not require.
type engineInfo interface {
	Info(ctx context.Context) (system.Info, error)
}

// engineMax is the default maximum of a request's resources, max, bounded
// by what the engine has, read from its Info once at start; with the
// reason for each bound it set, said to a request past it.
//
// CPUs are the engine's count where it says it, in place of the gateway's
// own: the engine refuses a container of more CPUs than it has, and a
// gateway in a narrower or wider cpuset than the engine's, or one talking
// to a remote engine (DOCKER_HOST), counted other CPUs, so a request
// between the two passed validation and met the engine's refusal at
// create.
//
// Memory is at most the engine's total: the engine takes a limit past it
// (it took 100 GiB on a machine of 23.5), which is no limit, and the /workspace
// tmpfs, sized from memoryBytes (WorkspaceSize), could then take the
// machine's memory from everything else on it. Lowered only: a default
// under the engine's total is a bound of its own.
func engineMax(ctx context.Context, log *slog.Logger, cli DockerAPI, max Resources) (Resources, map[string]string) {
	ei, ok := cli.(engineInfo)
	if !ok {
		return max, nil
	}
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := ei.Info(ictx)
	why := map[string]string{}
	if err != nil || info.NCPU <= 0 {
		log.Warn("the Docker engine did not say how many CPUs it has; requests may ask for as many as this machine has", "cpus", max.CPUs, "err", err)
	} else {
		if n := float64(info.NCPU); n != max.CPUs {
			log.Info("requests may ask for as many CPUs as the Docker engine has, not this machine", "engineCPUs", info.NCPU, "gatewayCPUs", max.CPUs)
			max.CPUs = n
		}
		why["resources.cpus"] = fmt.Sprintf("the Docker engine has %d CPUs", info.NCPU)
	}
	switch {
	case err != nil || info.MemTotal < minResources.MemoryBytes:
		log.Warn("the Docker engine did not say how much memory it has; requests may ask for the default maximum, which may be more than it has (no limit then)", "memoryBytes", max.MemoryBytes, "err", err)
	case info.MemTotal < max.MemoryBytes:
		log.Info("requests may ask for as much memory as the Docker engine has", "memoryBytes", info.MemTotal)
		max.MemoryBytes = info.MemTotal
		why["resources.memoryBytes"] = fmt.Sprintf("the Docker engine has %d bytes of memory in all, and a limit past that is no limit", info.MemTotal)
	}
	return max, why
}
