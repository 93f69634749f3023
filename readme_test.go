package hostgate_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/internal/testenv"
)

// errorWriters names the functions and types that put an API error's code
// on the wire, with the index of the code among their arguments (or the
// composite literal's elements).
var errorWriters = map[string]int{
	"WriteError": 2, // gateway.WriteError(w, status, code, msg)
	"writeError": 3, // forward's writeError(w, r, status, code, msg, hint)
	"authError":  1, // gateway's authError{status: …, code: …} (keyed: see keyedStatusCode)
}

// TestReadmeListsEveryErrorCode keeps the README's error table true: every
// code the gateway can answer (a literal at a writer above, or one of
// dockerhost's Code constants, which the executions API answers by table)
// has a row, every row names a code the source still answers, and a row's
// status is the one every writer given a literal http.StatusX answers the
// code with (the executions API's statusOf table included).
func TestReadmeListsEveryErrorCode(t *testing.T) {
	codes := map[string]string{} // code → where it is answered
	// What the source answers each code with, where it says so
	// literally: status → where. A code whose constant is named
	// (dockerhost.CodeConflict) is resolved after the walk.
	type answer struct{ code, status, where string }
	var answers []answer
	consts := map[string]string{} // dockerhost's and wire's CodeX → its code
	fset := token.NewFileSet()
	inspectSource(t, fset, func(path string, n ast.Node) bool {
		var name string
		var args []ast.Expr
		switch n := n.(type) {
		case *ast.CallExpr:
			name, args = funcName(n.Fun), n.Args
		case *ast.CompositeLit:
			name, args = funcName(n.Type), keyedStatusCode(n.Elts)
		case *ast.ValueSpec:
			// dockerhost's codes, and the agents' wire's: const CodeX = "x".
			if !strings.HasPrefix(path, "dockerhost"+string(filepath.Separator)) &&
				!strings.HasPrefix(path, filepath.Join("internal", "gateway", "wire")+string(filepath.Separator)) {
				return true
			}
			for i, id := range n.Names {
				if strings.HasPrefix(id.Name, "Code") && i < len(n.Values) {
					if s, ok := stringLit(n.Values[i]); ok {
						codes[s] = fset.Position(n.Pos()).String()
						consts[id.Name] = s
					}
				}
			}
			return true
		default:
			return true
		}
		if cl, ok := n.(*ast.CompositeLit); ok && funcName(cl.Type) == "" {
			// execapi's statusOf: {dockerhost.CodeX: http.StatusY, …}.
			for _, el := range cl.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok {
					if st := statusName(kv.Value); st != "" && strings.HasPrefix(funcName(kv.Key), "Code") {
						answers = append(answers, answer{"const " + funcName(kv.Key), st, fset.Position(kv.Pos()).String()})
					}
				}
			}
			return true
		}
		i, ok := errorWriters[name]
		if !ok || i >= len(args) {
			return true
		}
		where := fset.Position(args[i].Pos()).String()
		code, lit := stringLit(args[i])
		if lit {
			codes[code] = where
		} else if c := funcName(args[i]); strings.HasPrefix(c, "Code") {
			code = "const " + c
		}
		if st := statusName(args[i-1]); st != "" && code != "" {
			answers = append(answers, answer{code, st, where})
		}
		return true
	})
	// Guard the walk itself: a refactor that renamed the writers would
	// otherwise leave nothing to check.
	for _, c := range []string{"unauthorized", "host_offline", "docker_off", "invalid_request", "upstream_unavailable", "rate_limited"} {
		if codes[c] == "" {
			t.Fatalf("found no answer of code %q in the source: has an error writer been renamed? (errorWriters)", c)
		}
	}

	readme := readmeFile(t)
	documented := map[string]int{} // code → its row's status
	row := regexp.MustCompile("(?m)^\\| (`[a-z_]+`(?:, `[a-z_]+`)*) \\| ([0-9]{3}) \\|")
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		status, _ := strconv.Atoi(m[2])
		for _, c := range strings.Split(m[1], ", ") {
			documented[strings.Trim(c, "`")] = status
		}
	}
	statuses := map[string]int{} // StatusConflict → 409
	for n := 100; n < 600; n++ {
		if text := http.StatusText(n); text != "" {
			statuses["Status"+strings.NewReplacer(" ", "", "-", "", "'", "").Replace(text)] = n
		}
	}
	var wrong []string
	for _, a := range answers {
		code := a.code
		if c, ok := strings.CutPrefix(code, "const "); ok {
			if code, ok = consts[c]; !ok {
				continue // not one of dockerhost's codes
			}
		}
		n, ok := statuses[a.status]
		switch {
		case !ok:
			t.Errorf("%s: http.%s: no status of that name (statusName's table)", a.where, a.status)
		case documented[code] != 0 && documented[code] != n:
			wrong = append(wrong, fmt.Sprintf("%s: README says %d, %s answers %d", code, documented[code], a.where, n))
		}
	}
	sort.Strings(wrong)
	if len(wrong) > 0 {
		t.Errorf("README's error table gives codes another status than the gateway answers:\n  %s", strings.Join(wrong, "\n  "))
	}
	var missing, stale []string
	for c, where := range codes {
		if documented[c] == 0 {
			missing = append(missing, c+" ("+where+")")
		}
	}
	for c := range documented {
		if _, ok := codes[c]; !ok {
			stale = append(stale, c)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("README's error table lacks codes the gateway answers:\n  %s", strings.Join(missing, "\n  "))
	}
	if len(stale) > 0 {
		t.Errorf("README's error table lists codes nothing answers any more: %s", strings.Join(stale, ", "))
	}
}

func funcName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.UnaryExpr:
		return funcName(e.X)
	}
	return ""
}

// statusName is the name of net/http's status constant e names
// (http.StatusConflict), or "".
// keyedStatusCode is a keyed literal's status and code fields, in that
// order, as a positional one would hold them; other literals' elements as
// they are.
func keyedStatusCode(elts []ast.Expr) []ast.Expr {
	var status, code ast.Expr
	for _, el := range elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			return elts
		}
		switch k, _ := kv.Key.(*ast.Ident); {
		case k == nil:
		case k.Name == "status":
			status = kv.Value
		case k.Name == "code":
			code = kv.Value
		}
	}
	if status == nil || code == nil {
		return elts
	}
	return []ast.Expr{status, code}
}

func statusName(e ast.Expr) string {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || !strings.HasPrefix(sel.Sel.Name, "Status") {
		return ""
	}
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "http" {
		return ""
	}
	return sel.Sel.Name
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// TestErrorBodiesGoThroughWriters keeps TestReadmeListsEveryErrorCode
// seeing every code: an error body written by hand (a JSON literal with
// "error" and "code") is an answer its walk cannot find, as the web
// terminal's forbidden was. Such a body goes through a writer of
// errorWriters instead.
func TestErrorBodiesGoThroughWriters(t *testing.T) {
	byHand := regexp.MustCompile(`\{\s*\\?"error\\?"\s*:\s*\{\s*\\?"code\\?"`)
	fset := token.NewFileSet()
	inspectSource(t, fset, func(_ string, n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && byHand.MatchString(lit.Value) {
			t.Errorf("%s: an error body written by hand; answer it through gateway.WriteError (or another of errorWriters), so the README's error table test sees its code", fset.Position(lit.Pos()))
		}
		return true
	})
}

// inspectSource parses the module's non-test Go files (third_party and
// bench aside) and runs fn over each one's syntax tree (ast.Inspect),
// with the file's path.
func inspectSource(t *testing.T, fset *token.FileSet, fn func(path string, n ast.Node) bool) {
	t.Helper()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == "third_party" || path == "bench" || strings.HasPrefix(d.Name(), ".") && path != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool { return fn(path, n) })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadmeGoExampleBuilds compiles each Go example in the README against
// the packages as they are: a renamed function, field or option would
// leave a new user's first program broken. The example runs as the body
// of a function given ctx and token; each name it declares is then used,
// so that only the API is checked.
func TestReadmeGoExampleBuilds(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the README's example with")
	}
	readme := readmeFile(t)
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) == 0 {
		t.Fatal("README has no Go example (```go block) to check")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range blocks {
		src := readmeExampleSource(b[1])
		dir := t.TempDir()
		file := filepath.Join(dir, "example.go")
		if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		// The example's package exists only in the overlay: nothing is
		// written into the module, and ./... never sees it.
		pkg := fmt.Sprintf("_readme_example%d", i)
		overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(wd, pkg, "example.go"): file}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(goCmd, "build", "-overlay", filepath.Join(dir, "overlay.json"), "./"+pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("the README's Go example %d does not build (%v):\n%s\nas compiled:\n%s", i+1, err, out, src)
		}
	}
}

// readmeExampleSource makes a README Go example the body of a function
// given ctx and token, in a package of its own, each name it declares then
// used, so that only the API is checked.
func readmeExampleSource(example string) string {
	var src strings.Builder
	src.WriteString(`package readmeexample

import (
	"context"
	"os"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
	syncfs "github.com/hostgate/hostgate/sync"
)

var (
	_ hostgate.ExecOptions
	_ = client.Dial
	_ = syncfs.FromHost
	_ = os.Stdout
)

func _(ctx context.Context, token string) {
`)
	src.WriteString(example)
	declared := regexp.MustCompile(`(?m)^\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*:=`)
	seen := map[string]bool{}
	for _, m := range declared.FindAllStringSubmatch(example, -1) {
		for n := range strings.SplitSeq(m[1], ",") {
			if n = strings.TrimSpace(n); n != "_" && !seen[n] {
				seen[n] = true
				fmt.Fprintf(&src, "\t_ = %s\n", n)
			}
		}
	}
	src.WriteString("}\n")
	return src.String()
}

// otherTools' flags appear in the README beside hostgate's: docker's, in
// the cleanup of a retired gateway's containers and the benchmark's peer.
var otherTools = map[string]bool{"rm": true, "filter": true}

// TestReadmeFlagsExist keeps every --flag the README names one that a
// gateway or agent command defines (cmd/ and internal/, where the agent's
// commands are), so that an operator who copies one is not told it is
// undefined.
func TestReadmeFlagsExist(t *testing.T) {
	defined := definedFlags(t)
	readme := readmeFile(t)
	// After a space, backquote or parenthesis: not the "--" of a preview
	// subdomain (3000--build-01).
	named := regexp.MustCompile("(?:^|[\\s`(])--([a-z][a-z0-9-]*)")
	var unknown []string
	for _, m := range named.FindAllStringSubmatch(string(readme), -1) {
		if f := m[1]; !defined[f] && !otherTools[f] && !slices.Contains(unknown, f) {
			unknown = append(unknown, f)
		}
	}
	if len(unknown) > 0 {
		t.Errorf("README names flags no gateway or agent command defines: --%s", strings.Join(unknown, ", --"))
	}
}

// definedFlags is every flag name a gateway or agent command defines (the
// flag package's calls in cmd/ and internal/, where the agent's commands
// are).
func definedFlags(t *testing.T) map[string]bool {
	t.Helper()
	defined := map[string]bool{}
	fset := token.NewFileSet()
	sep := string(filepath.Separator)
	inspectSource(t, fset, func(path string, n ast.Node) bool {
		if !strings.HasPrefix(path, "cmd"+sep) && !strings.HasPrefix(path, "internal"+sep) {
			return false
		}
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		// fs.StringVar(&v, "name", …), fs.Bool("name", …), fs.Var(v, "name", …), fs.Func("name", …)
		switch name := funcName(call.Fun); {
		case strings.HasSuffix(name, "Var") && len(call.Args) >= 2:
			if s, ok := stringLit(call.Args[1]); ok {
				defined[s] = true
			}
		case slices.Contains([]string{"String", "Bool", "Int", "Int64", "Uint", "Float64", "Duration", "Func", "BoolFunc"}, name) && len(call.Args) >= 2:
			if s, ok := stringLit(call.Args[0]); ok {
				defined[s] = true
			}
		}
		return true
	})
	for _, f := range []string{"listen", "state-dir", "gateway", "force", "checkpoint-max-bytes"} {
		if !defined[f] {
			t.Fatalf("found no definition of flag --%s: has the flag walk lost its way?", f)
		}
	}
	return defined
}

// TestReadmeHoldsLatestBench keeps the README's performance table the run
// bench/latest.md holds: every row and note of that file is a line of the
// README, so a new run committed without the README (or the README edited
// by hand) fails here rather than showing numbers no run measured.
func TestReadmeHoldsLatestBench(t *testing.T) {
	latest, err := os.ReadFile(filepath.Join("bench", "latest.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := readmeFile(t)
	lines := map[string]bool{}
	for l := range strings.SplitSeq(string(readme), "\n") {
		lines[l] = true
	}
	rows := 0
	for l := range strings.SplitSeq(string(latest), "\n") {
		if !strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "- ") {
			continue
		}
		rows++
		if !lines[l] {
			t.Errorf("bench/latest.md has a line the README's Performance section lacks:\n%s", l)
		}
	}
	if rows < 10 {
		t.Errorf("bench/latest.md has %d table rows and notes; want its table", rows)
	}
}

// TestReadmeExecutionBodies keeps the README's curl examples of the
// executions API bodies the API takes: each -d body on a line that posts
// to /v1/executions or …/exec decodes, with no field unknown, into the Go
// client's request type (which mirrors the API's), and a provision names
// every resource limit, all of which the gateway requires.
func TestReadmeExecutionBodies(t *testing.T) {
	readme := readmeFile(t)
	call := regexp.MustCompile(`(?s)curl [^\n]*?(/v1/executions(?:/ID/exec)?)[ \\\n]+(?:[^\n]*\n)?\s*-d '(\{.*?\})'`)
	found := map[string]bool{}
	for _, m := range call.FindAllStringSubmatch(string(readme), -1) {
		path, body := m[1], m[2]
		dec := json.NewDecoder(strings.NewReader(body))
		dec.DisallowUnknownFields()
		switch path {
		case "/v1/executions":
			var req client.ProvisionRequest
			if err := dec.Decode(&req); err != nil {
				t.Errorf("README's provision body: %v\n%s", err, body)
				continue
			}
			r := req.Resources
			if r.CPUs <= 0 || r.MemoryBytes <= 0 || r.DiskBytes <= 0 || r.Pids < 32 || r.RuntimeMs <= 0 || r.MaxOutputBytes <= 0 || req.Network.Mode != "none" || req.Workspace.Kind == "" || !strings.Contains(req.Image, "@sha256:") {
				t.Errorf("README's provision body lacks a limit, the network, the workspace or a pinned image, which the gateway requires: %+v", req)
			}
		default:
			var req client.ExecRequest
			if err := dec.Decode(&req); err != nil {
				t.Errorf("README's exec body: %v\n%s", err, body)
				continue
			}
			if req.Command == "" || req.TimeoutMs <= 0 {
				t.Errorf("README's exec body lacks the command or its timeoutMs: %+v", req)
			}
		}
		found[path] = true
	}
	if !found["/v1/executions"] || !found["/v1/executions/ID/exec"] {
		t.Errorf("found the README's curl examples of %v; want a provision and an exec", found)
	}
}

// TestReadmeMetricsExist keeps every metric the README names one the
// gateway registers, so that an operator who alerts on it gets a series:
// hostgate_x, hostgate_x{label} and hostgate_x{label="v"} (the label one
// its definition declares, a string of the file that defines it), and
// "…_x", the README's short form of a name beside it (a registered
// metric ends so). Names the source holds as they are (cookies) pass too.
func TestReadmeMetricsExist(t *testing.T) {
	metrics := map[string]string{}       // full name → the file that defines it
	lits := map[string]map[string]bool{} // file → its string literals
	fset := token.NewFileSet()
	inspectSource(t, fset, func(path string, n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if s, ok := stringLit(n); ok {
				if lits[path] == nil {
					lits[path] = map[string]bool{}
				}
				lits[path][s] = true
			}
		case *ast.CompositeLit:
			// prometheus.CounterOpts{Namespace: "hostgate", Name: "x"}, or
			// {Name: "hostgate_x"}.
			var ns, name string
			for _, e := range n.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				k, _ := kv.Key.(*ast.Ident)
				v, ok := stringLit(kv.Value)
				if k == nil || !ok {
					continue
				}
				switch k.Name {
				case "Namespace":
					ns = v
				case "Name":
					name = v
				}
			}
			switch {
			case ns == "hostgate" && name != "":
				metrics["hostgate_"+name] = path
			case ns == "" && strings.HasPrefix(name, "hostgate_"):
				metrics[name] = path
			}
		case *ast.CallExpr:
			if funcName(n.Fun) == "NewDesc" && len(n.Args) > 0 {
				if s, ok := stringLit(n.Args[0]); ok {
					metrics[s] = path
				}
			}
		}
		return true
	})
	for _, m := range []string{"hostgate_tunnels_connected", "hostgate_agent_tunnels", "hostgate_sandbox_execs_total", "hostgate_build_info"} {
		if metrics[m] == "" {
			t.Fatalf("found no definition of metric %s: has the metric walk lost its way?", m)
		}
	}
	readme := readmeFile(t)
	// Not a file's name (~/.ssh/hostgate_ed25519) nor a cookie's prefixed
	// one (__Host-hostgate_session).
	named := regexp.MustCompile(`(?:^|[^\w/.-])(hostgate_[a-z0-9_]*[a-z0-9])(?:\{([a-z_]+)[=}])?`)
	for _, m := range named.FindAllStringSubmatch(string(readme), -1) {
		name, label := m[1], m[2]
		file, ok := metrics[name]
		if !ok {
			if !slices.ContainsFunc(slices.Collect(maps.Values(lits)), func(l map[string]bool) bool { return l[name] }) {
				t.Errorf("README names metric %s, which the gateway does not register", name)
			}
			continue
		}
		if label != "" && !lits[file][label] {
			t.Errorf("README names metric %s with label %q, which its definition (%s) does not declare", name, label, file)
		}
	}
	short := regexp.MustCompile(`…(_[a-z0-9_]*[a-z0-9])`)
	for _, m := range short.FindAllStringSubmatch(string(readme), -1) {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(metrics)), func(name string) bool { return strings.HasSuffix(name, m[1]) }) {
			t.Errorf("README names metric …%s, and no registered metric ends so", m[1])
		}
	}
}

// TestReadmeEnvVarsExist keeps every HOSTGATE_ variable the README names
// one that something reads: a flag's (HOSTGATE_<FLAG>, as the gateway's and
// agent's commands map every flag) or one the code or tests name as they
// are (HOSTGATE_E2E), so that a variable set as the README says is not
// silently ignored.
func TestReadmeEnvVarsExist(t *testing.T) {
	flags := definedFlags(t)
	named := map[string]bool{}
	env := regexp.MustCompile(`"(HOSTGATE_[A-Z0-9_]+)"`)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == "third_party" || strings.HasPrefix(d.Name(), ".") && path != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range env.FindAllStringSubmatch(string(b), -1) {
			named[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !named["HOSTGATE_E2E"] {
		t.Fatal("found no HOSTGATE_E2E in the Go files: has the walk lost its way?")
	}
	readme := readmeFile(t)
	for _, v := range regexp.MustCompile(`HOSTGATE_[A-Z0-9_]*[A-Z0-9]`).FindAllString(string(readme), -1) {
		flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(v, "HOSTGATE_"), "_", "-"))
		if !flags[flag] && !named[v] {
			t.Errorf("README names %s, which no flag maps to (--%s is defined by no command) and nothing reads", v, flag)
		}
	}
}

// notFields are backquoted camelCase names in the README that are not
// hostgate's JSON: E2B's setTimeout, which SetTimeout mirrors.
var notFields = map[string]bool{"setTimeout": true}

// TestReadmeJSONFieldsExist keeps every JSON field the README names one
// the gateway's answers or requests carry, so that a program written from
// the README reads a field that is there: each "key": of its JSON and each
// backquoted camelCase name (`workspaceBytes`) is a json tag of a struct
// in the source, or a string of it (a map's key, as /readyz's checks).
func TestReadmeJSONFieldsExist(t *testing.T) {
	known := map[string]bool{}
	fset := token.NewFileSet()
	inspectSource(t, fset, func(_ string, n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Field:
			if n.Tag == nil {
				return true
			}
			tag, err := strconv.Unquote(n.Tag.Value)
			if err != nil {
				return true
			}
			if name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ","); name != "" && name != "-" {
				known[name] = true
			}
		case *ast.BasicLit:
			if s, ok := stringLit(n); ok {
				known[s] = true
			}
		}
		return true
	})
	for _, f := range []string{"workspaceBytes", "agentVersion", "stdoutLossy", "endedAt"} {
		if !known[f] {
			t.Fatalf("found no json tag %q: has the walk lost its way?", f)
		}
	}
	readme := readmeFile(t)
	named := regexp.MustCompile("\"([A-Za-z]+)\":|`([a-z]+[A-Z][A-Za-z]*)`")
	var unknown []string
	for _, m := range named.FindAllStringSubmatch(string(readme), -1) {
		f := m[1] + m[2]
		if !known[f] && !notFields[f] && !slices.Contains(unknown, f) {
			unknown = append(unknown, f)
		}
	}
	if len(unknown) > 0 {
		t.Errorf("README names JSON fields nothing in the source carries: %s", strings.Join(unknown, ", "))
	}
}

// TestReadmeCommandsExist keeps every `gateway COMMAND [VERB]` and `agent
// COMMAND` the README gives one the binaries take, so that a command copied
// from it is not answered with their usage: gateway's commands are its
// register calls, a verb one its usage names ("host reset-key ID: … | host
// remove ID: …"), and agent's the keys of its command table.
func TestReadmeCommandsExist(t *testing.T) {
	gw := map[string]string{} // command → its usage line
	ag := map[string]bool{}
	sep := string(filepath.Separator)
	fset := token.NewFileSet()
	inspectSource(t, fset, func(path string, n ast.Node) bool {
		switch {
		case strings.HasPrefix(path, filepath.Join("cmd", "gateway")+sep):
			if call, ok := n.(*ast.CallExpr); ok && funcName(call.Fun) == "register" && len(call.Args) >= 2 {
				name, ok1 := stringLit(call.Args[0])
				usage, ok2 := stringLit(call.Args[1])
				if ok1 && ok2 {
					gw[name] = usage
				}
			}
		case strings.HasPrefix(path, filepath.Join("cmd", "agent")+sep):
			if lit, ok := n.(*ast.CompositeLit); ok {
				if _, ok := lit.Type.(*ast.MapType); ok {
					for _, e := range lit.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok {
							if k, ok := stringLit(kv.Key); ok {
								ag[k] = true
							}
						}
					}
				}
			}
		}
		return true
	})
	if gw["serve"] == "" || !strings.Contains(gw["host"], "reset-key") || !ag["connect"] {
		t.Fatalf("found gateway commands %v and agent commands %v: has the walk lost its way?", slices.Collect(maps.Keys(gw)), slices.Collect(maps.Keys(ag)))
	}
	readme := readmeFile(t)
	for _, m := range regexp.MustCompile("`(?:bin/)?gateway\\s+([a-z][a-z-]*)(?:\\s+([a-z][a-z-]*))?").FindAllStringSubmatch(string(readme), -1) {
		usage, ok := gw[m[1]]
		switch {
		case !ok:
			t.Errorf("README gives `gateway %s`, which is no gateway command", m[1])
		case strings.Contains(usage, " | ") && m[2] != "" && !regexp.MustCompile(`(?:^|\| )`+regexp.QuoteMeta(m[1]+" "+m[2])+`\b`).MatchString(usage):
			t.Errorf("README gives `gateway %s %s`, which gateway %s does not take (%s)", m[1], m[2], m[1], usage)
		}
	}
	// A command is followed by the code's end or a flag: `agent forwarding
	// refused: …` is the agent's log, not a command.
	for _, m := range regexp.MustCompile("`(?:bin/)?agent\\s+([a-z][a-z-]*)(?:`|\\s+-)").FindAllStringSubmatch(string(readme), -1) {
		if !ag[m[1]] {
			t.Errorf("README gives `agent %s`, which is no agent command", m[1])
		}
	}
}

// readmeFile is the README's text, which every TestReadme… reads.
func readmeFile(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReadmeNginxBlock keeps step 1's nginx server block one that serves a
// gateway: what each of its directives is there for (WebSocket upgrades for
// tunnels, sessions and terminals; the client's Host for subdomain
// previews; X-Forwarded-For for --trusted-proxy; streamed answers and
// bodies; no body bound below the API's), a read timeout past nginx's 60 s
// default, which cut a preview's long poll answered after 70 s with
// nginx's own 504 and an event stream or WebSocket silent for a minute
// (the gateway's own connections carry keepalives, a dev server's need
// not), and nginx itself taking it (nginx -t), where nginx is installed.
func TestReadmeNginxBlock(t *testing.T) {
	m := regexp.MustCompile("(?s)```nginx\n(.*?)```").FindSubmatch(readmeFile(t))
	if m == nil {
		t.Fatal("README has no nginx server block (```nginx)")
	}
	block := string(m[1])
	directives := map[string]string{} // name (and, for proxy_set_header, its header) → arguments
	for line := range strings.Lines(block) {
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(line)
		v, ok := strings.CutSuffix(line, ";")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if f[0] == "proxy_set_header" && len(f) > 1 {
			f = append([]string{f[0] + " " + strings.ToLower(f[1])}, f[2:]...)
		}
		directives[f[0]] = strings.Trim(strings.Join(f[1:], " "), `"`)
	}
	for name, want := range map[string]string{
		"proxy_http_version":               "1.1",
		"proxy_set_header upgrade":         "$http_upgrade",
		"proxy_set_header connection":      "upgrade",
		"proxy_set_header host":            "$host",
		"proxy_set_header x-forwarded-for": "$proxy_add_x_forwarded_for",
		"proxy_buffering":                  "off",
		"proxy_request_buffering":          "off",
		"client_max_body_size":             "0",
	} {
		got := directives[name]
		if name == "proxy_set_header host" && got == "$http_host" {
			got = "$host" // the client's Host with its port: as good
		}
		if got != want {
			t.Errorf("README's nginx block: %s is %q, want %q", name, got, want)
		}
	}
	// nginx's time units: "1h", "300s", "300" (seconds).
	read := 60 * time.Second
	if v, ok := directives["proxy_read_timeout"]; ok {
		if _, err := strconv.Atoi(v); err == nil {
			v += "s"
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("README's nginx block: proxy_read_timeout %q: %v", v, err)
		}
		read = d
	}
	if read < 10*time.Minute {
		t.Errorf("README's nginx block: proxy_read_timeout is %v: a preview's long poll, event stream or WebSocket silent that long is cut by nginx (a long poll answered with nginx's 504); want 10m or more", read)
	}

	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin, err = exec.LookPath("/usr/sbin/nginx")
	}
	testenv.RequirePeer(t, "nginx", err == nil)
	dir := t.TempDir()
	cert, key := selfSignedPEM(t, dir)
	block = strings.NewReplacer(
		"/etc/ssl/hostgate/fullchain.pem", cert,
		"/etc/ssl/hostgate/privkey.pem", key,
		"listen 443 ssl", "listen unix:"+filepath.Join(dir, "nginx.sock")+" ssl",
	).Replace(block)
	temps := ""
	for _, k := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		temps += fmt.Sprintf("  %s_temp_path %s;\n", k, filepath.Join(dir, k))
	}
	errLog := filepath.Join(dir, "error.log")
	conf := filepath.Join(dir, "nginx.conf")
	cfg := fmt.Sprintf("pid %s;\nerror_log %s;\nevents {}\nhttp {\n  access_log off;\n%s%s}\n", filepath.Join(dir, "nginx.pid"), errLog, temps, block)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-t", "-q", "-p", dir, "-c", conf, "-e", errLog).CombinedOutput(); err != nil {
		t.Errorf("nginx -t refuses the README's server block: %v\n%s\n%s", err, out, cfg)
	}
}

// selfSignedPEM writes a self-signed certificate and its key to dir, for a
// server block to name.
func selfSignedPEM(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gw.example.com"}, DNSNames: []string{"gw.example.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}
