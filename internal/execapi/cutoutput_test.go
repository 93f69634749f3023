package execapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	dockerclient "github.com/docker/docker/client"

	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/testenv"
)

// TestExecCutKeepsOutput: a real sandbox's command that its timeout or
// its output limit cuts answers 504 timeout or 422 output_limit with what
// it printed so far, in the error's stdout and stderr (as a result's, in
// the request's encoding), and the execution is destroyed all the same.
// The agent lost the last lines of a test run that hung: the error said
// only that it timed out.
func TestExecCutKeepsOutput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	h, img := realDocker(t)
	api, err := New(h, &Config{Authorize: func(http.ResponseWriter, *http.Request) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := client.New(srv.URL, "admin-token", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	provision := func(maxOutput int64) string {
		t.Helper()
		e, err := c.Provision(ctx, client.ProvisionRequest{Image: img, Workspace: client.Workspace{Kind: "empty"}, Network: client.Network{Mode: "none"},
			Resources: client.Resources{CPUs: 0.5, MemoryBytes: 64 << 20, DiskBytes: 8 << 20, Pids: 64, RuntimeMs: 120_000, MaxOutputBytes: maxOutput}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Terminate(context.Background(), e.ExecutionID) })
		return e.ExecutionID
	}
	// 5 s: room for a loaded engine to start the command, whose echo
	// must come before its timeout.
	hang := func(script string) client.ExecRequest {
		return client.ExecRequest{Command: "/bin/sh", Args: []string{"-c", script + "; sleep 100"}, TimeoutMs: 5000}
	}

	// On the wire, as curl shows it.
	id := provision(1 << 20)
	b, _ := json.Marshal(hang("echo before; echo warned >&2"))
	res, err := http.Post(srv.URL+"/v1/executions/"+id+"/exec", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	var body struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(raw, &body); err != nil || res.StatusCode != http.StatusGatewayTimeout ||
		body.Error["code"] != "timeout" || body.Error["stdout"] != "before\n" || body.Error["stderr"] != "warned\n" {
		t.Fatalf("exec past its timeout: %d %s (%v); want 504 timeout with stdout \"before\\n\" and stderr \"warned\\n\"", res.StatusCode, raw, err)
	}
	if _, err := c.Execution(ctx, id); apiCode(err) != "gone" {
		t.Fatalf("execution after its command's timeout: %v, want gone", err)
	}

	// Through the Go client, in base64: bytes that are not UTF-8 too.
	id = provision(1 << 20)
	req := hang(`printf 'before\377\n'`)
	req.Encoding = client.EncodingBase64
	_, err = c.Exec(ctx, id, req)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusGatewayTimeout || ae.Code != "timeout" || ae.Stdout != "before\xff\n" || ae.Stderr != "" || ae.StdoutLossy {
		t.Fatalf("exec past its timeout, base64: %#v; want 504 timeout with stdout \"before\\xff\\n\"", err)
	}

	// An output flood keeps the bytes up to the limit.
	id = provision(64 << 10)
	_, err = c.Exec(ctx, id, client.ExecRequest{Command: "yes", TimeoutMs: 60_000})
	if want := strings.Repeat("y\n", 32<<10); !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity || ae.Code != "output_limit" || ae.Stdout != want || ae.Stderr != "" {
		t.Fatalf("output flood: %v (stdout %d bytes); want 422 output_limit with the %d bytes kept", err, len(ae.Stdout), len(want))
	}
	if _, err := c.Execution(ctx, id); apiCode(err) != "gone" {
		t.Fatalf("execution after its output flood: %v, want gone", err)
	}
}

func apiCode(err error) string {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// realDocker is a dockerhost over the real engine with an owner of its
// own, whose containers and tools volumes end with the test, and the
// digest-pinned test image; it skips (fails under HOSTGATE_E2E=require)
// without them.
func realDocker(t *testing.T) (*dockerhost.Docker, string) {
	t.Helper()
	h, img, _ := realDockerWith(t, &dockerhost.Config{})
	return h, img
}

// realDockerWith is realDocker with cfg (its Owner and CheckpointDir
// set here), and the engine's client.
func realDockerWith(t *testing.T, cfg *dockerhost.Config) (*dockerhost.Docker, string, *dockerclient.Client) {
	t.Helper()
	cli, img := testenv.DockerEngine(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	owner := "test-" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg.Owner, cfg.CheckpointDir = owner, t.TempDir()
	h, err := dockerhost.NewDocker(ctx, slog.New(slog.DiscardHandler), cli, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, label := range []string{dockerhost.LabelOwner, dockerhost.LabelTools} {
			list, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", label+"="+owner))})
			for _, c := range list {
				_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
			}
		}
	})
	return h, img, cli
}
