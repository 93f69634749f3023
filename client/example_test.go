package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
)

// A sandbox's life as an agent runtime leads it: provision with limits,
// run commands, checkpoint, end it, and restore the checkpoint later.
// The executions API's Exec bounds a command by TimeoutMs and
// MaxOutputBytes, and past either (or when its ctx ends first) the
// sandbox is destroyed: every later call on it is a 410 gone whose Reason
// says why. To stream a command's output, or to stop one command and
// keep the sandbox, Dial the execution: it is a host too.
func ExampleClient_Provision() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("HOSTGATE_TOKEN"), nil) // an admin token
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.CloseIdleConnections()

	ex, err := c.Provision(ctx, client.ProvisionRequest{
		Image:     "registry.example.com/tools@sha256:…", // pinned by digest
		Workspace: client.Workspace{Kind: "empty"},
		Network:   client.Network{Mode: "none"},
		Resources: client.Resources{ // every field is required
			CPUs: 1, MemoryBytes: 512 << 20, DiskBytes: 256 << 20, Pids: 256,
			RuntimeMs: (30 * time.Minute).Milliseconds(), MaxOutputBytes: 8 << 20,
		},
	})
	if err != nil {
		fmt.Println(err) // a refused field: "gateway: resources.pids: … (400 invalid_request)"
		return
	}
	defer c.Terminate(ctx, ex.ExecutionID) // idempotent

	res, err := c.Exec(ctx, ex.ExecutionID, client.ExecRequest{
		Command: "sh", Args: []string{"-c", "cd /workspace && make test"}, TimeoutMs: 10 * 60_000,
	})
	var apiErr *client.APIError
	switch {
	case errors.As(err, &apiErr) && (apiErr.Code == "timeout" || apiErr.Code == "output_limit"):
		fmt.Println("the command was cut and the sandbox destroyed:", apiErr.Message)
		fmt.Println("it printed so far:", apiErr.Stdout, apiErr.Stderr) // the last lines of a test run that hung
		return
	case errors.As(err, &apiErr) && apiErr.Code == "gone":
		fmt.Println("the sandbox had ended:", apiErr.Reason, apiErr.EndedAt) // "runtime": RuntimeMs ran out
		return
	case err != nil:
		fmt.Println(err)
		return
	}
	fmt.Println("exit", res.ExitCode, res.Stdout, res.Stderr) // 127: not found, 137: killed (OOMKilled says by the memory limit)

	// The same sandbox as a host: output as it comes, one command stopped
	// by its own ctx without ending the sandbox, files over SFTP.
	h, err := c.Dial(ctx, ex.ExecutionID)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	cmdCtx, cancel := context.WithTimeout(ctx, time.Minute)
	_, err = h.Exec(cmdCtx, []string{"npm", "run", "build"}, hostgate.ExecOptions{Stdout: os.Stdout, Stderr: os.Stderr})
	cancel()
	if errors.Is(err, context.DeadlineExceeded) {
		fmt.Println("the build was stopped; the sandbox lives on")
	}

	cp, err := c.Checkpoint(ctx, ex.ExecutionID, "handoff") // the workspace's files, no processes
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = c.Terminate(ctx, ex.ExecutionID)

	restored, err := c.Restore(ctx, client.RestoreRequest{CheckpointID: cp.CheckpointID}) // Env, if any, given again
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Terminate(ctx, restored.ExecutionID)
	fmt.Println("restored as", restored.ExecutionID, "from", restored.RestoredFrom)
}

// A long-lived agent runtime keeps one Client with Reconnect: a host
// whose agent or gateway restarted connects again on its next use, and a
// host that is down says so with ErrOffline.
func ExampleClient_Dial() {
	ctx := context.Background()
	c, err := client.New("https://gw.example.com", os.Getenv("HOSTGATE_TOKEN"), &client.Options{Reconnect: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.CloseIdleConnections()

	h, err := c.Dial(ctx, "build-01")
	switch {
	case errors.Is(err, client.ErrOffline):
		fmt.Println("build-01's agent is not connected; try later")
		return
	case err != nil:
		fmt.Println(err) // "host build-01: gateway: no such host: no host of this id is enrolled (…) (404 not_found)", an invalid token, …
		return
	}
	defer h.Close()
	res, err := h.Exec(ctx, []string{"uname", "-a"}, hostgate.ExecOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(res.Stdout))
}
