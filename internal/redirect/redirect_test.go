package redirect

import (
	"net/url"
	"strings"
	"testing"
)

func TestLocalPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/hosts/a/terminal", "/hosts/a/terminal"},
		{"/preview/a/8080/?q=1#x", "/preview/a/8080/?q=1#x"},
		{"/a//b", "/a//b"},
		{"", "/"},
		{"hosts", "/"},
		{"https://evil.example/", "/"},
		{"//evil.example", "/"},
		{"/\\evil.example", "/"},
		{"/\t/evil.example", "/"},
		{"/\n/evil.example", "/"},
		{"/\r\n/evil.example", "/"},
		{"/x\x00", "/"},
		{"/x\x7f", "/"},
		{"/%zz", "/"},
	} {
		if got := LocalPath(tc.in); got != tc.want {
			t.Errorf("LocalPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzLocalPath: whatever comes in, what comes out, read the way a
// browser reads it (tabs and newlines dropped, backslashes as slashes),
// resolves to this origin.
func FuzzLocalPath(f *testing.F) {
	for _, s := range []string{"/", "/a/b?c#d", "//x", "/\\x", "/\t/x", "https://x/", "/%2F/x", "/.//x"} {
		f.Add(s)
	}
	base, _ := url.Parse("https://gw.example/login")
	f.Fuzz(func(t *testing.T, next string) {
		out := LocalPath(next)
		if out != "/" && out != next {
			t.Fatalf("LocalPath(%q) = %q: neither the input nor /", next, out)
		}
		browser := strings.NewReplacer("\t", "", "\n", "", "\r", "", "\\", "/").Replace(out)
		u, err := url.Parse(browser)
		if err != nil {
			t.Fatalf("LocalPath(%q) = %q, which does not parse: %v", next, out, err)
		}
		if r := base.ResolveReference(u); r.Host != "gw.example" || r.Scheme != "https" {
			t.Fatalf("LocalPath(%q) = %q leaves the origin: %s", next, out, r)
		}
	})
}
