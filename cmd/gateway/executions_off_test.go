package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// apiCall does one request with a bearer token and decodes the JSON answer.
func apiCall(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: %d, body not JSON: %v", method, url, res.StatusCode, err)
	}
	return res.StatusCode, out
}

// TestExecutionsOff: with --docker off the executions routes exist and
// answer 404 docker_off to an admin, 403 to a client token, and /v1/me
// tells the admin Docker is off.
func TestExecutionsOff(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	base := startServe(t, dir)
	out, err := cli(t, ctx, "token", "create", "--role", "admin", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	admin := lastLine(out)
	out, err = cli(t, ctx, "token", "create", "--role", "client", "--host", "h1", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	client := lastLine(out)
	for _, p := range []string{"POST /v1/executions", "GET /v1/executions/x", "POST /v1/executions/x/exec", "POST /v1/restores", "DELETE /v1/executions/x",
		"GET /v1/checkpoints", "GET /v1/checkpoints/x", "DELETE /v1/checkpoints/x"} {
		m, path, _ := strings.Cut(p, " ")
		status, body := apiCall(t, m, base+path, admin, "{}")
		if e, _ := body["error"].(map[string]any); status != http.StatusNotFound || e["code"] != "docker_off" ||
			e["message"] != "Docker executions are off on this gateway: it serves with --docker off: restart it with --docker on (or auto)" {
			t.Errorf("%s as admin: %d %v", p, status, body)
		}
		status, body = apiCall(t, m, base+path, client, "{}")
		if status != http.StatusForbidden {
			t.Errorf("%s as client: %d %v", p, status, body)
		}
	}
	status, me := apiCall(t, "GET", base+"/v1/me", admin, "")
	if status != http.StatusOK || me["docker"] != false || me["role"] != "admin" {
		t.Fatalf("/v1/me: %d %v", status, me)
	}
	if _, me := apiCall(t, "GET", base+"/v1/me", client, ""); me["docker"] != nil {
		t.Fatalf("/v1/me tells a client about Docker: %v", me)
	}
}

// TestExecutionsOffNoEngine: under --docker auto with no engine, the
// routes' docker_off says the engine is the fix, not the flag the
// gateway already has.
func TestExecutionsOffNoEngine(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	t.Setenv("DOCKER_HOST", "unix://"+dir+"/no-engine.sock")
	base := startServe(t, dir, func(c *serveConfig) { c.Docker = "auto" })
	out, err := cli(t, ctx, "token", "create", "--role", "admin", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	status, body := apiCall(t, "GET", base+"/v1/checkpoints", lastLine(out), "")
	if e, _ := body["error"].(map[string]any); status != http.StatusNotFound || e["code"] != "docker_off" ||
		e["message"] != "Docker executions are off on this gateway: no Docker engine answered when it started (--docker auto; its log says why): start the engine, give the gateway's user its socket (the docker group), then restart the gateway" {
		t.Fatalf("GET /v1/checkpoints under auto with no engine: %d %v", status, body)
	}
}

// TestRefuseExecutionFlags: a build without Docker executions (Windows)
// refuses the flags only executions use, saying why, where it accepted
// them and ignored them; the rest it accepts.
func TestRefuseExecutionFlags(t *testing.T) {
	for _, c := range []serveConfig{{Docker: "auto"}, {Docker: "off"}} {
		if err := refuseExecutionFlags(&c, "windows"); err != nil {
			t.Errorf("--docker %s: %v", c.Docker, err)
		}
	}
	for flag, c := range map[string]serveConfig{
		"--docker on":            {Docker: "on"},
		"--checkpoint-max-age":   {Docker: "auto", CheckpointMaxAge: 24 * time.Hour},
		"--checkpoint-max-bytes": {Docker: "off", CheckpointMaxBytes: 1 << 30},
		"--sandbox-pool":         {Docker: "auto", SandboxPool: 2},
		"--sandbox-max":          {Docker: "auto", SandboxMax: 4, sandboxMaxSet: true},
		"--sandbox-image":        {Docker: "off", SandboxImage: "img@sha256:00"},
		"--agent-binary":         {Docker: "auto", AgentBinary: "/usr/local/bin/agent"},
		"--repository-roots":     {Docker: "off", RepoRoots: "/srv/git"},
	} {
		err := refuseExecutionFlags(&c, "windows")
		if err == nil || !strings.Contains(err.Error(), flag) || !strings.Contains(err.Error(), "need a Unix gateway, not windows") {
			t.Errorf("%s on windows: %v, want it refused, named, and why", flag, err)
		}
	}
}

// TestDockerOffRefusesDockerFlags: a Unix gateway with --docker off runs
// no executions, so it refuses the flags only they read (checkpoint
// retention, the warm pool, the sandbox image, the agent binary,
// repository roots), from the command line or the environment, naming the
// flag and the fix, where it accepted them and did nothing with them.
func TestDockerOffRefusesDockerFlags(t *testing.T) {
	if !executionsBuilt {
		t.Skip("this build refuses them whatever --docker says (TestRefuseExecutionFlags)")
	}
	// Refused, serve returns at once; accepted, it serves until this ends.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		flag string
	}{
		"max-age flag":          {args: []string{"--checkpoint-max-age", "24h"}, flag: "--checkpoint-max-age"},
		"max-bytes flag":        {args: []string{"--checkpoint-max-bytes", "50G"}, flag: "--checkpoint-max-bytes"},
		"max-bytes env":         {env: map[string]string{"HOSTGATE_CHECKPOINT_MAX_BYTES": "1G"}, flag: "HOSTGATE_CHECKPOINT_MAX_BYTES"},
		"docker off env":        {args: []string{"--checkpoint-max-age", "1h"}, env: map[string]string{"HOSTGATE_DOCKER": "off"}, flag: "--checkpoint-max-age"},
		"sandbox-pool flag":     {args: []string{"--sandbox-pool", "2"}, flag: "--sandbox-pool"},
		"sandbox-max flag":      {args: []string{"--sandbox-max", "0"}, flag: "--sandbox-max"},
		"sandbox-max env":       {env: map[string]string{"HOSTGATE_SANDBOX_MAX": "32"}, flag: "HOSTGATE_SANDBOX_MAX"},
		"sandbox-image env":     {env: map[string]string{"HOSTGATE_SANDBOX_IMAGE": "img@sha256:00"}, flag: "HOSTGATE_SANDBOX_IMAGE"},
		"agent-binary flag":     {args: []string{"--agent-binary", "/usr/local/bin/agent"}, flag: "--agent-binary"},
		"repository-roots flag": {args: []string{"--repository-roots", "/srv/git"}, flag: "--repository-roots"},
	} {
		t.Run(name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := append([]string{"serve", "--listen", "127.0.0.1:0", "--state-dir", t.TempDir()}, tc.args...)
			if tc.env["HOSTGATE_DOCKER"] == "" {
				args = append(args, "--docker", "off")
			}
			_, err := cli(t, ctx, args...)
			if err == nil {
				t.Fatal("--docker off accepted a checkpoint retention setting it would ignore")
			}
			for _, want := range []string{tc.flag, "--docker off", "leave it unset"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
	// Without the retention flags --docker off serves as before.
	c := &serveConfig{Docker: "off", CertTTL: time.Minute, TokenRecheck: time.Second, LogFormat: "text", SandboxPool: 0}
	if err := c.validate(); err != nil {
		t.Fatalf("--docker off alone: %v", err)
	}
	c.Docker = "auto"
	c.CheckpointMaxAge = time.Hour
	if err := c.validate(); err != nil {
		t.Fatalf("--docker auto with --checkpoint-max-age: %v", err)
	}
}

// TestSandboxMaxFlag: --sandbox-max bounds live sandboxes by default
// (dockerhost.DefaultMaxLive's 32), takes 0 for no bound only when given,
// and refuses a negative bound or a word, naming the flag.
func TestSandboxMaxFlag(t *testing.T) {
	quiet := stdio{out: io.Discard, err: io.Discard}
	c, err := parseServeFlags("serve", quiet, nil, serveConfig{})
	if err != nil || c.SandboxMax != defaultSandboxMax || c.sandboxMaxSet || defaultSandboxMax == 0 {
		t.Fatalf("no --sandbox-max: %+v %v, want the default %d, not set", c, err, defaultSandboxMax)
	}
	c, err = parseServeFlags("dev", quiet, []string{"--sandbox-max", "0"}, serveConfig{})
	if err != nil || c.SandboxMax != 0 || !c.sandboxMaxSet {
		t.Fatalf("--sandbox-max 0: %+v %v, want 0, set", c, err)
	}
	for v, want := range map[string]string{"-1": "--sandbox-max -1: want 0 (no bound) or more", "many": "--sandbox-max wants a whole number"} {
		if _, err := parseServeFlags("serve", quiet, []string{"--sandbox-max", v}, serveConfig{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--sandbox-max %s: %v, want %q", v, err, want)
		}
	}
}
