package hostgate_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// errorWriters names the functions and types that put an API error's code
// on the wire, with the index of the code among their arguments (or the
// composite literal's elements).
var errorWriters = map[string]int{
	"WriteError": 2, // gateway.WriteError(w, status, code, msg)
	"writeError": 3, // forward's writeError(w, r, status, code, msg, hint)
	"authError":  1, // gateway's authError{status, code, msg, reason}
}

// TestReadmeListsEveryErrorCode keeps the README's error table true: every
// code the gateway can answer (a literal at a writer above, or one of
// dockerhost's Code constants, which the executions API answers by table)
// has a row, and every row names a code the source still answers.
func TestReadmeListsEveryErrorCode(t *testing.T) {
	codes := map[string]string{} // code → where it is answered
	fset := token.NewFileSet()
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
		ast.Inspect(f, func(n ast.Node) bool {
			var name string
			var args []ast.Expr
			switch n := n.(type) {
			case *ast.CallExpr:
				name, args = funcName(n.Fun), n.Args
			case *ast.CompositeLit:
				name, args = funcName(n.Type), n.Elts
			case *ast.ValueSpec:
				// dockerhost's codes: const CodeX = "x".
				if !strings.HasPrefix(path, "dockerhost"+string(filepath.Separator)) {
					return true
				}
				for i, id := range n.Names {
					if strings.HasPrefix(id.Name, "Code") && i < len(n.Values) {
						if s, ok := stringLit(n.Values[i]); ok {
							codes[s] = fset.Position(n.Pos()).String()
						}
					}
				}
				return true
			default:
				return true
			}
			i, ok := errorWriters[name]
			if !ok || i >= len(args) {
				return true
			}
			if s, ok := stringLit(args[i]); ok {
				codes[s] = fset.Position(args[i].Pos()).String()
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Guard the walk itself: a refactor that renamed the writers would
	// otherwise leave nothing to check.
	for _, c := range []string{"unauthorized", "host_offline", "docker_off", "invalid_request", "upstream_unavailable", "rate_limited"} {
		if codes[c] == "" {
			t.Fatalf("found no answer of code %q in the source: has an error writer been renamed? (errorWriters)", c)
		}
	}

	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| (`[a-z_]+`(?:, `[a-z_]+`)*) \\| [0-9]{3} \\|")
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		for _, c := range strings.Split(m[1], ", ") {
			documented[strings.Trim(c, "`")] = true
		}
	}
	var missing, stale []string
	for c, where := range codes {
		if !documented[c] {
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

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
