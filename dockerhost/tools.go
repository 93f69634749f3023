package dockerhost

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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

// LabelTools marks a tools volume and its holder container (value: the
// owner).
const LabelTools = "hostgate.tools"

// toolsDone is the last file of a tools volume: a volume without it was
// never completely written (a gateway stopped while copying).
const toolsDone = ".hostgate-tools-complete"

// toolsVolume is the volume every container mounts read-only at ToolsDir.
// Its name is a hash of the owner and the tools, so a volume is written
// once per content and never changes: a gateway that restarts with the
// same tools uses the same one, executions it adopts keep theirs, and a
// new agent build gets a new volume. Written once instead of copied into
// every container, the tools cost a cold create no exec and a sandbox no
// memory (a tmpfs copy was charged to each container's memory limit).
//
// A holder container (created, never started) mounts it for the host's
// life: the engine refuses to remove a volume in use, so no volume prune
// takes it away under a create, which would make the engine create it
// again, empty. A container prune does remove the holder; each create
// checks that it is still there. One live host per owner (state
// directory) is assumed: a host's first write removes the owner's other
// holders, taking them for a killed run's.
type toolsVolume struct {
	name    string
	owner   string
	archive []byte // the tools, then toolsDone

	mu     sync.Mutex // held while writing: one writer at a time
	holder string     // the holder's id; "" until written
	swept  bool       // a previous run's holders removed
}

// errNoImage is a holder create that found no image: the caller pulls it
// without holding the lock.
var errNoImage = errors.New("dockerhost: image not found")

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
	// The owner is any label value; the name must be a volume name.
	sum := sha256.New()
	sum.Write([]byte(owner + "\x00"))
	sum.Write(buf.Bytes())
	return &toolsVolume{name: "hostgate-tools-" + hex.EncodeToString(sum.Sum(nil)[:10]), owner: owner, archive: buf.Bytes()}, nil
}

// mount is the volume at ToolsDir, read-only unless rw. Labelled, so
// that a volume the engine creates for a mount is this owner's too.
func (v *toolsVolume) mount(rw bool) mount.Mount {
	return mount.Mount{Type: mount.TypeVolume, Source: v.name, Target: ToolsDir, ReadOnly: !rw,
		VolumeOptions: &mount.VolumeOptions{NoCopy: true, Labels: map[string]string{LabelTools: v.owner}}}
}

// ensureTools makes the tools volume hold the tools before a container
// that mounts it is created. The first call of a host writes it through
// the holder, a container of image: the engine's archive API reaches a
// volume through any container that mounts it. Later calls only check
// that the holder is still there (one inspect). A missing image is pulled without holding the lock, so one slow
// pull does not stall every other provision.
func (h *Docker) ensureTools(ctx context.Context, image string) error {
	v := h.policy.tools
	if v == nil {
		return nil
	}
	for pulled := false; ; pulled = true {
		v.mu.Lock()
		err := h.writeTools(ctx, v, image)
		v.mu.Unlock()
		if !errors.Is(err, errNoImage) {
			return err
		}
		if pulled {
			return &Error{Code: CodeInvalidRequest, Field: "image", Message: "image not found after a pull", Err: err}
		}
		if perr := h.pull(ctx, image); perr != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return h.pullFailed(image, perr)
		}
	}
}

// writeTools creates the holder and writes the volume unless it holds the
// tools already (a previous run's, or this one's). Under v.mu.
func (h *Docker) writeTools(ctx context.Context, v *toolsVolume, image string) error {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		// After Close's dropTools: a new holder would outlive the host.
		return errClosed
	}
	if !v.swept {
		// Holders of a previous run (one killed) keep their volumes in
		// use; retried until they are gone.
		v.swept = h.removeToolHolders(ctx, v.holder)
	}
	if v.holder != "" {
		_, err := h.api.ContainerInspect(ctx, v.holder)
		if !cerrdefs.IsNotFound(err) {
			return nil
		}
		h.logger.Warn("tools volume holder gone (a container prune?); writing the volume again", "volume", v.name)
		v.holder = ""
	}
	var resp container.CreateResponse
	var err error
	for try := range 2 {
		// Not cancelled with ctx, as in create: an abandoned create could
		// still complete in the engine.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), destroyTimeout)
		resp, err = h.api.ContainerCreate(cctx,
			&container.Config{Image: image, Entrypoint: []string{"/bin/sh"}, NetworkDisabled: true,
				// Every other key of this package empty: an image's
				// hostgate.owner and hostgate.pool made the holder a warm
				// container of the owner's (ownLabels).
				Labels: setOwnLabels(map[string]string{LabelTools: v.owner})},
			&container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{v.mount(true)}}, nil, nil, v.name+"-holder")
		cancel()
		if !cerrdefs.IsConflict(err) || try == 1 {
			break
		}
		// A holder by this name that the sweep missed (or a create that
		// timed out here and completed in the engine): this owner's, so
		// remove it and create again.
		if derr := h.destroy(v.name + "-holder"); derr != nil {
			return fmt.Errorf("dockerhost: remove stale tools volume holder: %w", derr)
		}
	}
	switch {
	case cerrdefs.IsNotFound(err):
		return errNoImage
	case cerrdefs.IsConflict(err):
		return fmt.Errorf("dockerhost: tools volume holder %s keeps coming back (another gateway of this state directory?): %w", v.name+"-holder", err)
	case err != nil:
		return fmt.Errorf("dockerhost: tools volume holder: %w", err)
	}
	cid := resp.ID
	ok := false
	defer func() {
		if !ok {
			if derr := h.destroy(cid); derr != nil {
				h.logger.Error("remove tools volume holder", "container", cid, "err", derr)
			}
		}
	}()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if _, err := h.api.ContainerStatPath(ctx, cid, ToolsDir+"/"+toolsDone); err != nil {
		if !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("dockerhost: tools volume: %w", err)
		}
		if err := h.api.CopyToContainer(ctx, cid, ToolsDir, bytes.NewReader(v.archive), container.CopyToContainerOptions{}); err != nil {
			return fmt.Errorf("dockerhost: write tools volume: %w", err)
		}
		h.logger.Info("tools volume written", "volume", v.name, "bytes", len(v.archive))
	}
	ok = true
	v.holder = cid
	h.removeOldTools(ctx, v.name)
	return nil
}

// dropTools removes the holder and, when no provision is in flight (one
// could be creating a container that mounts it), this owner's tools
// volumes that no container uses: a host that closes leaves none behind
// unless an execution still uses it (kept for a restart to adopt).
func (h *Docker) dropTools() {
	v := h.policy.tools
	if v == nil {
		return
	}
	v.mu.Lock()
	holder := v.holder
	v.holder = ""
	v.mu.Unlock()
	if holder != "" {
		if err := h.destroy(holder); err != nil {
			h.logger.Error("remove tools volume holder", "container", holder, "err", err)
		}
	}
	h.mu.Lock()
	pending := len(h.pending)
	h.mu.Unlock()
	if pending == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), destroyTimeout)
		// A killed run's holder too: this run took it over only at its
		// first provision, and without one it kept its volume forever.
		h.removeToolHolders(ctx, "")
		h.removeOldTools(ctx, "")
		cancel()
	}
}

// removeToolHolders removes this owner's holder containers but keep ("":
// none kept) and reports whether all went.
func (h *Docker) removeToolHolders(ctx context.Context, keep string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), destroyTimeout)
	defer cancel()
	list, err := h.api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelTools+"="+h.owner))})
	if err != nil {
		h.logger.Warn("list tools volume holders", "err", err)
		return false
	}
	ok := true
	for _, c := range list {
		if c.ID == keep {
			continue
		}
		if err := h.destroy(c.ID); err != nil {
			h.logger.Warn("remove a previous tools volume holder", "container", c.ID, "err", err)
			ok = false
		}
	}
	return ok
}

// removeOldTools removes this owner's tools volumes other than keep ("":
// all) that no container uses; the engine refuses the ones in use (an
// adopted execution of an older build, a live one at Close), which stay
// until a later first provision or Close.
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
