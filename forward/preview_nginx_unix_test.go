//go:build unix

package forward

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// TestPreviewThroughBufferingNginx: a preview's event stream reaches the
// browser event by event through an nginx left at its defaults
// (proxy_buffering on), as a deployment that kept them has it. Without
// X-Accel-Buffering: no, nginx held the first event until the dev
// server ended the stream (audit42).
func TestPreviewThroughBufferingNginx(t *testing.T) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin, err = exec.LookPath("/usr/sbin/nginx")
	}
	testenv.RequirePeer(t, "nginx", err == nil)

	read := make(chan struct{})
	var ended atomic.Bool
	e := newPreviewEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		// The second event waits for the client to read the first. A
		// buffering nginx never passes it on, so the stream ends anyway
		// after a while: what the test checks is whether the first event
		// arrived before that end, not how soon.
		select {
		case <-read:
		case <-r.Context().Done():
			return
		case <-time.After(20 * time.Second):
		}
		_, _ = io.WriteString(w, "data: two\n\n")
		ended.Store(true)
	}), nil)

	sock := nginx(t, bin, e.gw.Listener.Addr().String())
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodGet, fmt.Sprintf("http://nginx/preview/dev/%d/events", e.devPort), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Accel-Buffering") != "" {
		t.Fatalf("through nginx: %s, X-Accel-Buffering %q; want 200, the header kept from the client by nginx", resp.Status, resp.Header.Get("X-Accel-Buffering"))
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event: %q, %v", line, err)
	}
	if ended.Load() {
		t.Fatal("the first event came through nginx only once the dev server ended the stream: nginx buffered it")
	}
	close(read)
	if rest, err := io.ReadAll(br); err != nil || string(rest) != "\ndata: two\n\n" {
		t.Fatalf("second event: %q, %v", rest, err)
	}
}

// nginx runs bin in front of the gateway at gw with nginx's default
// buffering, in its own prefix, listening on a Unix socket only, and
// stops it when the test ends. It returns the socket's path.
func nginx(t *testing.T, bin, gw string) string {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "nginx.sock")
	conf := filepath.Join(dir, "nginx.conf")
	errLog := filepath.Join(dir, "error.log")
	temps := ""
	for _, k := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		temps += fmt.Sprintf("  %s_temp_path %s;\n", k, filepath.Join(dir, k))
	}
	cfg := fmt.Sprintf(`daemon off;
master_process off;
pid %s;
error_log %s;
events { worker_connections 64; }
http {
  access_log off;
%s  server {
    listen unix:%s;
    location / {
      proxy_pass http://%s;
    }
  }
}
`, filepath.Join(dir, "nginx.pid"), errLog, temps, sock, gw)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", conf, "-e", errLog)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	for range 200 {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
			return sock
		}
		select {
		case err := <-exited:
			exited <- err
			log, _ := os.ReadFile(errLog)
			t.Fatalf("nginx exited: %v\n%s%s", err, out.String(), log)
		case <-time.After(50 * time.Millisecond):
		}
	}
	log, _ := os.ReadFile(errLog)
	t.Fatalf("nginx did not listen on %s in 10 s\n%s%s", sock, out.String(), log)
	return ""
}
