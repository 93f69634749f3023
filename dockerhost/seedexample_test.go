package dockerhost

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/mount"
)

// TestSeedExampleRequest takes the seed's own provision request as it is
// written (a crypto.randomUUID() execution id, a registry image by digest,
// a git-worktree of main, 2 CPUs, 4 GiB of memory, 10 GiB of disk, 256
// pids, 30 minutes, 8 MiB of output, network none): the policy accepts it
// under the default maximum, and builds the container the seed's table
// says, with those numbers: NanoCpus, Memory and an equal MemorySwap,
// PidsLimit, the in-container sleep of the runtime and AutoRemove, a
// bounded /workspace tmpfs, a read-only root, no-new-privileges, a
// numeric non-root user, cap-drop ALL and nothing added, network none.
func TestSeedExampleRequest(t *testing.T) {
	limits := DefaultMaxResources()
	limits.CPUs = 2 // the seed's 2, on a machine of any size
	p := &Policy{Max: limits}
	req := ProvisionRequest{
		ExecutionID: "0b6a2c1e-7f3d-4e59-9a8b-2c4d6e8f0a1b",
		Image:       "registry.example.com/agent@sha256:" + strings.Repeat("0123456789abcdef", 4),
		Workspace:   WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: "/srv/repositories/project", Revision: "main"},
		Resources: Resources{
			CPUs:           2,
			MemoryBytes:    4 << 30,
			DiskBytes:      10 << 30,
			Pids:           256,
			RuntimeMs:      30 * 60_000,
			MaxOutputBytes: 8 << 20,
		},
		Network: Network{Mode: "none"},
	}
	if err := p.ValidateProvision(&req); err != nil {
		t.Fatalf("the seed's example refused: %v", err)
	}
	cfg, hc, err := p.ContainerConfig(req.ExecutionID, 2000000042, req, time.Now().Add(30*time.Minute), nil)
	if err != nil {
		t.Fatal(err)
	}
	if hc.NanoCPUs != 2e9 || hc.Memory != 4<<30 || hc.MemorySwap != hc.Memory || hc.PidsLimit == nil || *hc.PidsLimit != 256 {
		t.Errorf("resources %+v, want NanoCpus 2e9, Memory and MemorySwap 4 GiB, PidsLimit 256", hc.Resources)
	}
	if !slices.Equal(cfg.Entrypoint, deadlineArgv("", "1800")) || !hc.AutoRemove {
		t.Errorf("entrypoint %q, AutoRemove %v; want the 1800 s in-container deadline and --rm", cfg.Entrypoint, hc.AutoRemove)
	}
	if ws := hc.Tmpfs[WorkspaceDir]; !strings.HasPrefix(ws, "size=") || WorkspaceSize(req.Resources) > req.Resources.DiskBytes {
		t.Errorf("/workspace tmpfs %q, want bounded by diskBytes", ws)
	}
	if !hc.ReadonlyRootfs || !slices.Equal(hc.SecurityOpt, []string{"no-new-privileges"}) || cfg.User != "2000000042:2000000042" ||
		!slices.Equal(hc.CapDrop, []string{"ALL"}) || len(hc.CapAdd) != 0 || hc.Privileged || hc.NetworkMode != "none" {
		t.Errorf("config user %q, host config %+v: want read-only root, no-new-privileges, the numeric user, cap-drop ALL and none added, network none", cfg.User, hc)
	}
	if len(hc.Binds) != 0 || slices.ContainsFunc(hc.Mounts, func(m mount.Mount) bool { return m.Type == mount.TypeBind }) {
		t.Errorf("a git-worktree execution's container binds %q, mounts %+v; want no bind mount", hc.Binds, hc.Mounts)
	}
}
