package testenv

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/docker/docker/client"
)

// DockerEngine returns a client for the real Docker engine (as
// dockerhost.NewClient makes one) and the digest-pinned test image
// (HOSTGATE_TEST_IMAGE), or skips without them (fails under
// HOSTGATE_E2E=require). The client closes when the test ends.
func DockerEngine(t testing.TB) (*client.Client, string) {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err = cli.Ping(ctx)
		cancel()
		if err != nil {
			_ = cli.Close()
		}
	}
	RequirePeer(t, "docker engine", err == nil)
	t.Cleanup(func() { _ = cli.Close() })
	img := os.Getenv("HOSTGATE_TEST_IMAGE")
	RequirePeer(t, "HOSTGATE_TEST_IMAGE", img != "")
	return cli, img
}
