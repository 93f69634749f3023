//go:build unix

package main

import (
	"bufio"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lineWriter hands each log line to a channel.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	select {
	case w <- string(p):
	default:
	}
	return len(p), nil
}

// TestServeLogsAndIgnoresHangup: SIGHUP killed `gateway serve` without
// its drain (Go's default for a signal nobody asked for), cutting every
// session on a `kill -HUP` or a systemd unit's ExecReload. serve logs it
// and goes on. Without ignoreHangups the signal kills this test binary.
func TestServeLogsAndIgnoresHangup(t *testing.T) {
	ctx := testCtx(t)
	lines := make(lineWriter, 4)
	stop := ignoreHangups(ctx, slog.New(slog.NewTextHandler(lines, nil)))
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-lines:
		if !strings.Contains(l, "SIGHUP ignored") || !strings.Contains(l, "SIGTERM") {
			t.Errorf("log %q, want it to say SIGHUP is ignored and what stops the gateway", l)
		}
	case <-ctx.Done():
		t.Fatal("no log of the SIGHUP")
	}
}

// TestServeSurvivesItsLogReaderGone: with its log piped to a logger that
// went away (`gateway serve 2>&1 | logger`, the logger restarted), the
// gateway's next log line killed it with SIGPIPE, every session cut and
// no drain. It serves on, and drains on SIGTERM.
func TestServeSurvivesItsLogReaderGone(t *testing.T) {
	ctx := testCtx(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	gw := exec.CommandContext(ctx, self, "serve", "--listen", "127.0.0.1:0", "--state-dir", t.TempDir())
	gw.Env = append(os.Environ(), "HOSTGATE_TEST_BE_GATEWAY=1")
	gw.Stderr = w
	err = gw.Start()
	_ = w.Close()
	if err != nil {
		_ = r.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Process.Kill(); _ = gw.Wait() })
	logs := bufio.NewReader(r)
	var addr string
	for addr == "" {
		line, err := logs.ReadString('\n')
		if err != nil {
			t.Fatalf("gateway exited before serving: %v", err)
		}
		if _, after, ok := strings.Cut(line, " addr="); ok && strings.Contains(line, "gateway serving") {
			addr, _, _ = strings.Cut(after, " ")
		}
	}
	_ = r.Close() // the log's reader is gone
	// Logged ("SIGHUP ignored"), into the broken pipe.
	if err := gw.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for i := range 20 { // the log line may come after the first answers
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET /healthz %d after the log's reader left: %v", i, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /healthz: %s", resp.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := gw.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("gateway gone: %v", err)
	}
	if err := gw.Wait(); err != nil {
		t.Fatalf("gateway after SIGTERM: %v, want a clean exit", err)
	}
}
