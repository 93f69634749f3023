package hostgate_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// goGetApp is a program a user writes after `go get
// github.com/hostgate/hostgate`: it dials a host through a gateway and
// makes a host key, whose type is the ssh package of hostgate's x/crypto
// copy (sshlayer's keys are of that package, see its doc), and hands the
// key to stock x/crypto/ssh and back in its wire form, as the doc says.
// It prints the key's fingerprint, then the one of the key come back.
const goGetApp = `package main

import (
	"context"
	"fmt"
	"os"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/sshlayer"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
	stockssh "golang.org/x/crypto/ssh"
)

func main() {
	var key ssh.Signer
	key, err := sshlayer.LoadOrCreateHostKey(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(sshlayer.Fingerprint(key.PublicKey()))
	stock, err := stockssh.ParsePublicKey(key.PublicKey().Marshal())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	back, err := ssh.ParsePublicKey(stock.Marshal())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(sshlayer.Fingerprint(back))
	if len(os.Args) < 5 {
		return
	}
	var h *hostgate.Host
	h, err = client.Dial(context.Background(), os.Args[2], os.Args[3], os.Args[4])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer h.Close()
}
`

// TestGoGetBuildsOutside builds hostgate as a dependency, as a user's
// module gets it after the README's `go get github.com/hostgate/hostgate`:
// its go.mod requires github.com/hostgate/hostgate with only a replace of
// it by this checkout, which is what a published version is to Go, since
// Go applies only the main module's replace lines. The module holds
// goGetApp, which it runs, and the README's first Go example. It then
// builds cmd/gateway and cmd/agent from that module (what `go install
// …@version` builds), and checks that hostgate's go.mod has no replace or
// exclude line, which `go install …@version` refuses outright. While hostgate built against its copies of x/crypto and
// pkg/sftp through replace lines, such a module got stock x/crypto and
// failed (DialEarly undefined, OpenFileNoWait undefined). go.sum is the
// checkout's, so that no checksum is looked up.
func TestGoGetBuildsOutside(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hostgate and both binaries in a module of its own (-short)")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to build a module that requires hostgate with: %v", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// GOPROXY stays as set: the module cache holds what the checkout's
	// build and scripts/test's cross builds fetched, which is all (it
	// passes with GOPROXY=off then), but a consumer's tidy also wants
	// modules only other systems build with (go-winio, go-isatty).
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")

	out, err := exec.Command(goCmd, "mod", "edit", "-json").Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var mod struct{ Replace, Exclude []json.RawMessage }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	if len(mod.Replace)+len(mod.Exclude) > 0 {
		t.Errorf("go.mod has %d replace and %d exclude directives: `go install github.com/hostgate/hostgate/cmd/gateway@version` refuses to build a module with either, and a module that requires hostgate ignores them", len(mod.Replace), len(mod.Exclude))
	}

	readme := readmeFile(t)
	if !strings.Contains(string(readme), "`go get github.com/hostgate/hostgate`") {
		t.Error("README does not tell a program's module to `go get github.com/hostgate/hostgate`")
	}
	example := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(readme)
	if example == nil {
		t.Fatal("README has no Go example (```go block) to build outside")
	}
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	app := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/gogetapp\n\ngo 1.26.0\n\n" +
			"require github.com/hostgate/hostgate v0.0.0\n\n" +
			"replace github.com/hostgate/hostgate => " + wd + "\n",
		"go.sum":            string(sum), // every checksum the build needs, so it runs offline
		"main.go":           goGetApp,
		"readme/example.go": readmeExampleSource(string(example[1])),
	}
	if err := os.Mkdir(filepath.Join(app, "readme"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(app, filepath.FromSlash(name)), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bin := t.TempDir()
	exe := ""
	if runtime.GOOS == "windows" {
		exe = ".exe"
	}
	run := func(args ...string) bool {
		t.Helper()
		cmd := exec.Command(goCmd, args...)
		cmd.Dir, cmd.Env = app, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("in a module that requires hostgate, go %s: %v\n%s", strings.Join(args, " "), err, out)
			return false
		}
		return true
	}
	if !run("mod", "tidy") {
		t.Fatalf("go.mod:\n%s", files["go.mod"])
	}
	run("build", "./readme")
	if run("build", "-o", filepath.Join(bin, "app"+exe), ".") {
		key := filepath.Join(t.TempDir(), "host_key")
		out, err := exec.Command(filepath.Join(bin, "app"+exe), key).CombinedOutput()
		fps := strings.Fields(string(out))
		if err != nil || len(fps) != 2 || !strings.HasPrefix(fps[0], "SHA256:") || fps[1] != fps[0] {
			t.Errorf("the program built against hostgate, making a host key and handing it to stock x/crypto/ssh and back, printed no two equal fingerprints: %v\n%s", err, out)
		}
	}
	run("build", "-o", bin+string(filepath.Separator),
		"github.com/hostgate/hostgate/cmd/gateway", "github.com/hostgate/hostgate/cmd/agent")
	for _, name := range []string{"gateway", "agent"} {
		if _, err := os.Stat(filepath.Join(bin, name+exe)); err != nil {
			t.Errorf("cmd/%s built from a module that requires hostgate: %v", name, err)
		}
	}
}
