package dockerhost

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
)

// LabelTools marks the volumes that hold Config.Tools (value: the owner).
const LabelTools = "hostgate.tools"

// toolsDone is the last file of a tools volume: a volume without it was
// never completely written (a gateway stopped while copying).
const toolsDone = ".hostgate-tools-complete"

// toolsVolume is the volume every container mounts read-only at ToolsDir.
// Its name is the owner and a hash of the tools, so a volume is written
// once per content and never changes: a gateway that restarts with the
// same tools uses the same one, executions it adopts keep theirs, and a
// new agent build gets a new volume. Written once instead of copied into
// every container, the tools cost a cold create no exec and a sandbox no
// memory (a tmpfs copy was charged to each container's memory limit).
type toolsVolume struct {
	name    string
	archive []byte // the tools, then toolsDone

	mu    sync.Mutex // held while ensuring: one writer at a time
	ready bool
}

func newToolsVolume(owner string, tools []Tool) (*toolsVolume, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, t := range slices.Concat(tools, []Tool{{Name: toolsDone, Mode: 0o644}}) {
		if err := tw.WriteHeader(&tar.Header{
			Name: t.Name, Mode: int64(t.Mode.Perm()), Size: int64(len(t.Data)),
			Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0),
		}); err != nil {
			return nil, fmt.Errorf("tools archive: %w", err)
		}
		if _, err := tw.Write(t.Data); err != nil {
			return nil, fmt.Errorf("tools archive: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tools archive: %w", err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return &toolsVolume{name: owner + "-tools-" + hex.EncodeToString(sum[:8]), archive: buf.Bytes()}, nil
}

// mount is the read-only mount of the volume at ToolsDir.
func (v *toolsVolume) mount() mount.Mount {
	return mount.Mount{Type: mount.TypeVolume, Source: v.name, Target: ToolsDir, ReadOnly: true,
		VolumeOptions: &mount.VolumeOptions{NoCopy: true}}
}

// ensureTools makes the tools volume exist and hold the tools before a
// container that mounts it is created (the engine would otherwise create
// it empty). The first call of a gateway writes it through a container of
// image that is created, never started, and removed: the engine's archive
// API reaches a volume through any container that mounts it. Later calls
// only check that it still exists. It also removes this owner's volumes
// of other tools that no container uses.
func (h *Docker) ensureTools(ctx context.Context, image string) error {
	v := h.toolsVol
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ready {
		_, err := h.api.VolumeInspect(ctx, v.name)
		if !cerrdefs.IsNotFound(err) {
			return nil
		}
		// Removed behind this host's back (a volume prune, another
		// gateway of this state directory closing): write it again.
		v.ready = false
	}
	if _, err := h.api.VolumeCreate(ctx, volume.CreateOptions{Name: v.name, Labels: map[string]string{LabelTools: h.owner}}); err != nil {
		return fmt.Errorf("dockerhost: create tools volume: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	rw := v.mount()
	rw.ReadOnly = false
	cid, err := h.create(ctx, &container.Config{Image: image, Entrypoint: []string{"/bin/sh"}, NetworkDisabled: true, Labels: map[string]string{LabelTools: h.owner}},
		&container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{rw}}, v.name+"-writer-"+hex.EncodeToString(b[:]))
	if err != nil {
		return fmt.Errorf("dockerhost: tools volume: %w", err)
	}
	defer func() {
		if derr := h.destroy(cid); derr != nil {
			h.logger.Error("remove tools volume writer", "container", cid, "err", derr)
		}
	}()
	if _, err := h.api.ContainerStatPath(ctx, cid, ToolsDir+"/"+toolsDone); err != nil {
		if !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("dockerhost: tools volume: %w", err)
		}
		if err := h.api.CopyToContainer(ctx, cid, ToolsDir, bytes.NewReader(v.archive), container.CopyToContainerOptions{}); err != nil {
			return fmt.Errorf("dockerhost: write tools volume: %w", err)
		}
		h.logger.Info("tools volume written", "volume", v.name, "bytes", len(v.archive))
	}
	v.ready = true
	h.removeOldTools(ctx, v.name)
	return nil
}

// removeOldTools removes this owner's tools volumes other than keep ("":
// all) that no container uses; the engine refuses the ones in use (an
// adopted execution of an older build, a live one at Close), which stay
// until a later start.
func (h *Docker) removeOldTools(ctx context.Context, keep string) {
	list, err := h.api.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelTools+"="+h.owner))})
	if err != nil {
		h.logger.Warn("list tools volumes", "err", err)
		return
	}
	for _, vol := range list.Volumes {
		if vol == nil || vol.Name == keep {
			continue
		}
		if err := h.api.VolumeRemove(ctx, vol.Name, false); err == nil {
			h.logger.Info("removed old tools volume", "volume", vol.Name)
		}
	}
}
