package dockerhost

import (
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
)

// testPoolImageMoved: with unpinned images allowed, a tag moved to another
// image after a warm container was made for it (docker pull, docker tag)
// provisions the image the tag now names, as a cold create does. The pool
// handed out its container of the old image until the TTL replaced it (10
// minutes by default): the new image's fix was not in the sandbox.
func testPoolImageMoved(t *testing.T) {
	cli, img := engine(t)
	ctx := testCtx(t, 2*time.Minute)
	tag := "hostgate-test-moving:" + uniqueOwner()
	if err := cli.ImageTag(ctx, img, tag); err != nil {
		t.Fatal(err)
	}
	var movedID string
	// Registered before the host's: run after it has removed its
	// containers, which an image in use would outlive.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = cli.ImageRemove(ctx, tag, image.RemoveOptions{})
		if movedID != "" {
			_, _ = cli.ImageRemove(ctx, movedID, image.RemoveOptions{Force: true})
		}
	})
	old, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	req := emptyReq(tag, small())
	h := newTestHost(t, cli, &Config{AllowUnpinnedImages: true, Pool: &PoolConfig{Size: 1, Keys: []ProvisionRequest{req}}})
	waitPool(t, h, "a warm container of the tag", func(s PoolStats) bool { return s.Ready == 1 })

	// Another image (the same files, a label more), and the tag moved to it.
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Entrypoint: []string{"true"}}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	moved, err := cli.ContainerCommit(ctx, c.ID, container.CommitOptions{Reference: tag, Changes: []string{"LABEL hostgate.test.moved=" + tag}})
	_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	movedID = moved.ID
	if moved.ID == old.ID {
		t.Fatal("the commit made no new image")
	}

	ex := provision(t, h, req)
	ins, err := cli.ContainerInspect(ctx, ex.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	if ins.Image != moved.ID {
		t.Fatalf("provision of %s runs image %s, want %s, which the tag names now (it named %s when the pool filled); pool %+v", tag, ins.Image, moved.ID, old.ID, h.PoolStats())
	}
	// The stale warm container is gone, not kept for the next claim.
	waitPool(t, h, "a refill of the tag's new image", func(s PoolStats) bool { return s.Ready == 1 })
	ex2 := provision(t, h, req)
	if ins, err := cli.ContainerInspect(ctx, ex2.ContainerID); err != nil || ins.Image != moved.ID {
		t.Fatalf("second provision runs image %s (%v), want %s", ins.Image, err, moved.ID)
	}
	if s := h.PoolStats(); s.Hits != 1 {
		t.Fatalf("the refill of the new image was not claimed: pool %+v", s)
	}
}
