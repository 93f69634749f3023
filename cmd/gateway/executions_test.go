//go:build unix

package main

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/internal/webterm"
	"github.com/prometheus/client_golang/prometheus"
)

// TestDockerModeWithoutEngine: on refuses to start without an engine;
// auto starts with executions off.
func TestDockerModeWithoutEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-engine.sock"))
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := &serveConfig{Listen: "127.0.0.1:0", StateDir: t.TempDir(), Docker: "on", CertTTL: time.Minute, LogFormat: "text"}
	err := serve(ctx, logger, c, nil)
	if err == nil || !strings.Contains(err.Error(), "no Docker engine") {
		t.Fatalf("--docker on without an engine: %v", err)
	}
	cli, err := engine(ctx, "auto", logger)
	if err != nil || cli != nil {
		t.Fatalf("--docker auto without an engine: %v %v", cli, err)
	}
}

// TestSandboxImageUnpinnedRefusedAtStart: a --sandbox-image that no
// provision takes (not pinned by digest) stops the start, naming the flag
// and how to pin it, where the gateway used to serve and answer every "New
// sandbox" 400 (found by the audit30 audit). An engine is not needed: the
// image is checked before the engine is asked.
func TestSandboxImageUnpinnedRefusedAtStart(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-engine.sock"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, img := range []string{"busybox:latest", "Registry.example.com/tools@sha256:" + strings.Repeat("a", 64)} {
		_, err := cli(t, ctx, "serve", "--listen", "127.0.0.1:0", "--state-dir", t.TempDir(), "--sandbox-image", img)
		if err == nil {
			t.Fatalf("--sandbox-image %s: served until the test's deadline", img)
		}
		for _, want := range []string{"--sandbox-image", img} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("--sandbox-image %s: error %q does not say %q", img, err, want)
			}
		}
	}
	// A pinned one starts (auto without an engine: executions off).
	startServe(t, t.TempDir(), func(c *serveConfig) {
		c.Docker, c.SandboxImage = "auto", "registry.example.com/tools@sha256:"+strings.Repeat("a", 64)
	})
}

// TestEngineDeniedSaysTheFix: an engine whose socket refuses the
// gateway's user (one that runs as its own user, not in the docker group)
// is not "no engine": auto warns with the fix, where it logged at info
// that no engine answered, and on names the fix too (found by the audit30
// audit). The error is built as the Docker client builds it; a test run as
// root cannot be refused by the socket.
func TestEngineDeniedSaysTheFix(t *testing.T) {
	dial := &url.Error{Op: "Head", URL: "http://%2Fvar%2Frun%2Fdocker.sock/_ping",
		Err: &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EACCES)}}
	denied := fmt.Errorf("permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: %w", dial)
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	if err := noEngine("auto", denied, logger); err != nil || !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), engineDenied) {
		t.Errorf("auto, denied: %v; log:\n%s", err, &log)
	}
	if err := noEngine("on", denied, logger); err == nil || !strings.Contains(err.Error(), engineDenied) || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("on, denied: %v", err)
	}
	log.Reset()
	if err := noEngine("auto", errors.New("no such socket"), logger); err != nil || !strings.Contains(log.String(), "level=INFO") || strings.Contains(log.String(), "group") {
		t.Errorf("auto, no engine: %v; log:\n%s", err, &log)
	}
}

// TestAutoWithoutEngineWarnsOfRetention: --docker auto that finds no
// engine still starts (executions off) with the retention flags, since
// the next start may find one, but says in the log that this run applies
// none of it and how to fix that.
func TestAutoWithoutEngineWarnsOfRetention(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-engine.sock"))
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := &serveConfig{Listen: "127.0.0.1:0", StateDir: t.TempDir(), Docker: "auto", CertTTL: time.Minute, LogFormat: "text",
		CheckpointMaxAge: 24 * time.Hour}
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- serve(ctx, logger, c, func(net.Addr) { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("--docker auto with --checkpoint-max-age and no engine did not start: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := log.String()
	if !strings.Contains(out, "level=WARN msg=\"checkpoint retention not applied: no Docker engine answered") || !strings.Contains(out, "maxAge=24h0m0s") {
		t.Fatalf("no warning that retention is not applied:\n%s", out)
	}
}

func TestReadAgentBinary(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := readAgentBinary(filepath.Join(dir, "missing")); err == nil {
		t.Error("an explicit missing agent binary was accepted")
	}
	script := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readAgentBinary(script); err == nil || !strings.Contains(err.Error(), "ELF") {
		t.Errorf("a shell script as agent binary: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if b, _, err := readAgentBinary(self); err != nil || len(b) == 0 {
		t.Errorf("an ELF binary: %d bytes, %v", len(b), err)
	}
	trunc := filepath.Join(dir, "agent.trunc")
	if err := os.WriteFile(trunc, []byte("\x7fELF\x02\x01\x01"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readAgentBinary(trunc); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("a truncated ELF header as agent binary: %v", err)
	}
	// An object file (ET_REL): this test binary's header with e_type 1.
	obj, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	obj[16], obj[17] = byte(elf.ET_REL), 0 // e_type, in the header's byte order (EI_DATA)
	if elf.Data(obj[elf.EI_DATA]) == elf.ELFDATA2MSB {
		obj[16], obj[17] = 0, byte(elf.ET_REL)
	}
	relPath := filepath.Join(dir, "agent.o")
	if err := os.WriteFile(relPath, obj, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readAgentBinary(relPath); err == nil || !strings.Contains(err.Error(), "ET_REL") {
		t.Errorf("an ELF object file as agent binary: %v", err)
	}
}

// TestElfInterpreter: a CGO_ENABLED=0 Go build names no loader; Debian's
// /bin/sh (dynamically linked) names ld-linux's. The gateway warns on the
// second at startup instead of failing every provision 12 s later.
func TestElfInterpreter(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "static")
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=") // no -race or -buildmode=pie from the caller
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	if _, got, err := readAgentBinary(bin); err != nil || got.interp != "" {
		t.Errorf("static build: interpreter %q, %v; want none", got.interp, err)
	}
	// dash, dynamically linked on Debian.
	if _, got, err := readAgentBinary("/bin/sh"); err != nil || !strings.Contains(got.interp, "ld-") {
		t.Errorf("/bin/sh: interpreter %q, %v; want the dynamic loader", got.interp, err)
	}
}

// TestElfSymbolBytes: a plain build carries symbols and DWARF (the gateway
// suggests -ldflags='-s -w', since every sandbox holds a copy of the agent
// in its memory); a stripped build carries none and runs the same.
func TestElfSymbolBytes(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"ran\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sizes := map[string]uint64{}
	for name, flags := range map[string][]string{"plain": nil, "stripped": {"-ldflags=-s -w"}} {
		bin := filepath.Join(dir, name)
		cmd := exec.Command("go", append(append([]string{"build", "-o", bin}, flags...), src)...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v: %s", name, err, out)
		}
		if out, err := exec.Command(bin).Output(); err != nil || string(out) != "ran\n" {
			t.Fatalf("%s build: %q %v", name, out, err)
		}
		b, info, err := readAgentBinary(bin)
		if err != nil {
			t.Fatal(err)
		}
		sizes[name] = info.symbolBytes
		t.Logf("%s: %d bytes, %d of symbols and DWARF", name, len(b), info.symbolBytes)
	}
	if sizes["plain"] < 256<<10 || sizes["stripped"] != 0 {
		t.Errorf("symbol bytes: plain %d, stripped %d; want a plain build's and none", sizes["plain"], sizes["stripped"])
	}
}

func TestOwnerPerStateDir(t *testing.T) {
	a, b := owner("/var/lib/a"), owner("/var/lib/b")
	if a == b || a != owner("/var/lib/a/") || !strings.HasPrefix(a, "hostgate-") {
		t.Fatalf("owner: %q %q", a, b)
	}
}

// The checkpoint store's figures appear on /metrics under their names:
// what is stored, and retention's removals by rule.
func TestCheckpointMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	registerCheckpointMetrics(reg, func() dockerhost.CheckpointStats {
		return dockerhost.CheckpointStats{Stored: 3, StoredBytes: 4096, RemovedMaxAge: 2, RemovedMaxBytes: 5, FreedBytes: 700}
	})
	got := gathered(t, reg)
	want := map[string]float64{
		"hostgate_checkpoints":                                         3,
		"hostgate_checkpoint_bytes":                                    4096,
		"hostgate_checkpoint_retention_removals_total{rule=max-age}":   2,
		"hostgate_checkpoint_retention_removals_total{rule=max-bytes}": 5,
		"hostgate_checkpoint_retention_freed_bytes_total":              700,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("metrics: %v, want %v", got, want)
	}
}

// The live executions and the warm pool's figures appear on /metrics
// under their names.
func TestSandboxMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	registerSandboxMetrics(reg, func() int { return 7 }, func() dockerhost.PoolStats {
		return dockerhost.PoolStats{Hits: 10, Misses: 3, Dead: 1, Fills: 14, FillErrors: 2, Reaps: 4, Ready: 5, Filling: 1}
	})
	want := map[string]float64{
		"hostgate_sandboxes":                              7,
		"hostgate_sandbox_pool_ready":                     5,
		"hostgate_sandbox_pool_filling":                   1,
		"hostgate_sandbox_pool_fill_errors_total":         2,
		"hostgate_sandbox_pool_reaps_total":               4,
		"hostgate_sandbox_pool_claims_total{result=hit}":  10,
		"hostgate_sandbox_pool_claims_total{result=miss}": 3,
		"hostgate_sandbox_pool_claims_total{result=dead}": 1,
	}
	if got := gathered(t, reg); !maps.Equal(got, want) {
		t.Fatalf("metrics: %v, want %v", got, want)
	}
}

// The web terminals' counts appear on /metrics under their names.
func TestTerminalMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	registerTerminalMetrics(reg, func() webterm.Stats { return webterm.Stats{Open: 5, Waiting: 2} })
	if got := gathered(t, reg); !maps.Equal(got, map[string]float64{"hostgate_web_terminals": 5, "hostgate_web_terminals_waiting": 2}) {
		t.Fatalf("metrics: %v, want 5 open, 2 waiting", got)
	}
}

// gathered is reg's gauges and counters by name, labels in braces.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return got
}

// TestReattachCutByTheEndWarnsNothing: an adopted execution whose agent's
// re-attach fails because the execution ended meanwhile (a DELETE, its
// runtime) or the gateway is stopping is logged at INFO, saying which; only
// a re-attach that failed on a running execution warns. A soak's DELETE of
// a sandbox while a restarted gateway re-attached it warned "agent not
// re-attached: ... agent did not answer: its tunnel ended".
func TestReattachCutByTheEndWarnsNothing(t *testing.T) {
	cut := errors.New("execapi: agent did not start: agent did not answer: its tunnel ended (stderr: none)")
	terminated := func(context.Context, string) (string, time.Time) { return "terminated", time.Now() }
	running := func(context.Context, string) (string, time.Time) { return "", time.Time{} }
	stopping, stop := context.WithCancel(context.Background())
	stop()
	for _, c := range []struct {
		name  string
		ctx   context.Context
		err   error
		ended func(context.Context, string) (string, time.Time)
		want  string
	}{
		{"re-attached", t.Context(), nil, running, `level=INFO msg="adopted execution: agent re-attached"`},
		{"terminated meanwhile", t.Context(), cut, terminated, `level=INFO msg="adopted execution ended before its agent was re-attached" execution=e1 reason=terminated`},
		{"gateway stopping", stopping, cut, running, `level=INFO msg="adopted execution: agent not re-attached: the gateway is stopping"`},
		{"agent lost", t.Context(), cut, running, `level=WARN msg="adopted execution: agent not re-attached" execution=e1 err=`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf testenv.LogBuffer
			logReattach(c.ctx, slog.New(slog.NewTextHandler(&buf, nil)), "e1", c.err, c.ended)
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Fatalf("logged:\n%s\nwant one line with %s", buf.String(), c.want)
			}
		})
	}
}

// TestSandboxMaxDefaultIsDockerhosts: --sandbox-max's default, kept apart
// for builds without dockerhost, is the one dockerhost documents.
func TestSandboxMaxDefaultIsDockerhosts(t *testing.T) {
	if defaultSandboxMax != dockerhost.DefaultMaxLive {
		t.Fatalf("--sandbox-max defaults to %d, dockerhost.DefaultMaxLive is %d", defaultSandboxMax, dockerhost.DefaultMaxLive)
	}
}
