package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// TestBrowserPreviewVite runs a real Vite dev server (e2e/testdata/vite) on
// the host the gateway reaches this machine as and opens it through the
// preview in Chromium (previewvite.mjs): the app's module renders, an
// edited source file reaches the page by hot reload without a reload, and
// the dev server stopped (Ctrl-C) and started again brings the tab back
// to the app. TestBrowserPreviewHMR speaks Vite's protocol from Go; this
// is Vite's own client and server, tokens, pings and all.
func TestBrowserPreviewVite(t *testing.T) {
	vite := viteInstall(t)
	// gateway dev, whose preview domain is localhost.
	t.Run("dev", func(t *testing.T) {
		d := startDev(t)
		previewVite(t, vite, d.url, d.admin, "localhost", nil)
	})
	// gateway serve with a real name as a deployment has (mapped to
	// loopback in Chromium: not a secure context, and the gateway's cookie
	// rides to every port's preview), and an agent that outlives the
	// gateway: restarted (an upgrade), it brings the tab back too. The tab
	// polled with sockets refused 401 for good, the gateway's restart
	// having ended its preview cookie, and never updated again.
	t.Run("serve", func(t *testing.T) {
		g := startGateway(t, "", "--preview-domain", "preview.test")
		g.startAgent("local", "")
		previewVite(t, vite, g.url, g.admin, "preview.test", func() {
			g.restartSamePort(t, "--preview-domain", "preview.test")
			g.waitConnected("local", true, 30*time.Second)
		})
	})
}

// previewVite runs previewvite.mjs against the gateway at gwURL, whose
// host local is this machine and whose preview domain is domain, logged
// in with token; restart, when set, restarts the gateway on its address.
func previewVite(t *testing.T, vite, gwURL, token, domain string, restart func()) {
	app := t.TempDir()
	if err := os.CopyFS(app, os.DirFS("testdata/vite")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(vite, "node_modules"), filepath.Join(app, "node_modules")); err != nil {
		t.Fatal(err)
	}
	port, release := ipv6OnlyPort(t)
	// On ::1 alone first, as Vite binds localhost where the resolver puts
	// ::1 first (Node 17 and later, Debian's /etc/hosts); the restart binds
	// localhost as this machine resolves it.
	dev := startVite(t, app, port, "--host", "::1")
	_, gwPort, _ := net.SplitHostPort(strings.TrimPrefix(gwURL, "http://"))
	env := []string{"HOSTGATE_URL=" + gwURL, "HOSTGATE_TOKEN=" + token,
		"HOSTGATE_RESOLVER_RULES=MAP *.preview.test 127.0.0.1",
		"HOSTGATE_PATH_URL=" + gwURL + "/preview/local/" + strconv.Itoa(port) + "/",
		"HOSTGATE_PREVIEW_URL=http://" + strconv.Itoa(port) + "--local." + domain + ":" + gwPort + "/"}
	if restart != nil {
		env = append(env, "HOSTGATE_RESTART_GATEWAY=1")
	}
	runBrowserSteps(t, "previewvite.mjs", func(what string) {
		switch what {
		case "edit source":
			if err := os.WriteFile(filepath.Join(app, "src", "message.js"), []byte(`export const message = "updated through HMR";`+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		case "stop dev server":
			// Ctrl-C in its terminal.
			_ = dev.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-dev.done:
			case <-time.After(10 * time.Second):
				t.Fatalf("vite did not exit 10 s after SIGINT:\n%s", dev.output())
			}
		case "start dev server":
			release()
			dev = startVite(t, app, port)
		case "restart gateway":
			restart()
		default:
			t.Fatalf("previewvite.mjs asks for %q", what)
		}
	}, env...)
}

// ipv6OnlyPort returns a port free on ::1 and held refusing on 127.0.0.1
// until release: the agent dials localhost at 127.0.0.1 first, so another
// server there at that port number would answer the preview in place of
// a dev server on ::1 alone.
func ipv6OnlyPort(t *testing.T) (port int, release func()) {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "[::1]:0")
		if err != nil {
			t.Fatalf("a port on ::1: %v", err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		release, err = testenv.HoldRefusing(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		ln.Close()
		if err == nil {
			return port, release
		}
	}
	t.Fatal("20 ports free on ::1 were all taken on 127.0.0.1")
	return 0, nil
}

// viteInstall is the directory scripts/env.sh's setup_vite installed
// e2e/testdata/vite's lock into (HOSTGATE_VITE_DIR, or where setup_vite
// puts it by default), or fails the test under HOSTGATE_E2E=require.
func viteInstall(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("HOSTGATE_VITE_DIR")
	if dir == "" {
		lock, err := os.ReadFile("testdata/vite/package-lock.json")
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(lock)
		state := os.Getenv("HG_STATE")
		if state == "" {
			state = "/tmp/hostgate-test-env"
		}
		dir = filepath.Join(state, "vite", hex.EncodeToString(sum[:])[:12])
	}
	_, err := os.Stat(filepath.Join(dir, "node_modules", "vite", "bin", "vite.js"))
	testenv.RequirePeer(t, "Vite in "+dir+" (scripts/test installs it: . scripts/env.sh && setup_vite)", err == nil && lookPath("node"))
	return dir
}

var viteReadyRE = regexp.MustCompile(`VITE v\S+\s+ready in`)

// startVite runs the app's dev server on port, as `npx vite --port PORT
// ARGS...` in its directory would, and waits for it to be ready.
func startVite(t *testing.T, app string, port int, args ...string) *proc {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	args = append([]string{filepath.Join(app, "node_modules", "vite", "bin", "vite.js"), app, "--port", strconv.Itoa(port)}, args...)
	// NO_COLOR: Vite colours its banner when CI is set (picocolors), as
	// it is on the CI machine, and the escapes split the words waited for.
	p := start(t, "vite", node, []string{"NO_COLOR=1"}, args...)
	p.waitFor(viteReadyRE, 30*time.Second)
	return p
}
