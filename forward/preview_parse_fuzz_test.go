package forward

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzUpstreamRelative: a dev server's Location becomes a path on the
// preview only when it names the dev server's own address (localhost or
// loopback, the port it was reached on), and then a path a browser
// resolves on the preview's origin: one leading slash, never "//" or "/\"
// (another host's address to a browser).
func FuzzUpstreamRelative(f *testing.F) {
	f.Add("http://localhost:3000/login?next=%2Fapp#top", uint16(3000))
	f.Add("http://127.0.0.1:3000//evil.example/x", uint16(3000))
	f.Add("http://[::1]:80", uint16(80))
	f.Add("https://localhost/x", uint16(443))
	f.Add("http://localhost:3000/\\evil.example", uint16(3000))
	f.Add("http://localhost:3000/%2F%2Fevil.example", uint16(3000))
	f.Add("http://user@localhost:3000/", uint16(3000))
	f.Fuzz(func(t *testing.T, loc string, port uint16) {
		rel, ok := upstreamRelative(loc, int(port))
		if !ok {
			return
		}
		u, err := url.Parse(loc)
		if err != nil {
			t.Fatalf("%q: made %q of a Location that does not parse", loc, rel)
		}
		if h := strings.ToLower(u.Hostname()); h != "localhost" && h != "127.0.0.1" && h != "::1" {
			t.Fatalf("%q: another host's address made a path on the preview, %q", loc, rel)
		}
		if p := u.Port(); p != "" && p != strconv.Itoa(int(port)) {
			t.Fatalf("%q: another port's address made a path on port %d's preview, %q", loc, port, rel)
		}
		if !strings.HasPrefix(rel, "/") || strings.HasPrefix(rel, "//") || strings.HasPrefix(rel, "/\\") {
			t.Fatalf("%q became %q, not a path on the preview's origin", loc, rel)
		}
		r, err := url.Parse(rel)
		if err != nil || r.Scheme != "" || r.Host != "" {
			t.Fatalf("%q became %q, which reads as scheme %q host %q (%v)", loc, rel, r.Scheme, r.Host, err)
		}
	})
}

// FuzzScopeCookies: every cookie a path-form preview passes on is
// host-only and scoped under the preview's prefix as a browser reads the
// line, its name and value are the dev server's word for word, and a
// second pass changes nothing.
func FuzzScopeCookies(f *testing.F) {
	const prefix = "/preview/dev/3000"
	f.Add("a=1; Path=/; Domain=gw.example")
	f.Add("sid=x; Path=/preview/dev/3000/app; HttpOnly")
	f.Add("b=2; Path=/preview/dev/30000")
	f.Add("c=3; Path=relative")
	f.Add("=; Path=")
	f.Add(`p="{\"a\": 1}"; Path=/x; Path=; domain=gw.example`)
	f.Fuzz(func(t *testing.T, line string) {
		h := http.Header{"Set-Cookie": {line, "keep=1"}}
		scopeCookies(h, prefix)
		for _, l := range h.Values("Set-Cookie") {
			c := browserReads(l)
			if c.domain || !underPrefix(c.path, prefix) {
				t.Fatalf("%q became %q", line, l)
			}
			if pair, _, _ := strings.Cut(l, ";"); l != "keep=1; Path="+prefix+"/" && !strings.HasPrefix(line, pair+";") && line != pair {
				t.Fatalf("%q became %q: another name or value", line, l)
			}
		}
		again := h.Clone()
		scopeCookies(again, prefix)
		if !slices.Equal(again.Values("Set-Cookie"), h.Values("Set-Cookie")) {
			t.Fatalf("not idempotent: %q then %q", h.Values("Set-Cookie"), again.Values("Set-Cookie"))
		}
	})
}

// setCookie is what a browser reads of a Set-Cookie line (RFC 6265
// section 5.2) that the preview's checks look at.
type setCookie struct {
	name   string
	domain bool   // it has a Domain attribute
	path   string // its last Path attribute's value; "" for the default path
}

func browserReads(line string) setCookie {
	parts := strings.Split(line, ";")
	name, _, _ := strings.Cut(parts[0], "=")
	c := setCookie{name: strings.Trim(name, " \t")}
	for _, av := range parts[1:] {
		n, v, _ := strings.Cut(av, "=")
		switch strings.ToLower(strings.Trim(n, " \t")) {
		case "domain":
			c.domain = true
		case "path":
			if c.path = strings.Trim(v, " \t"); !strings.HasPrefix(c.path, "/") {
				c.path = ""
			}
		}
	}
	return c
}

// FuzzSiblingOrigin: the preview answers a CORS request for an Origin only
// when it is the subdomain preview of another port of the same host,
// over http or https, and says that Origin back as it came.
func FuzzSiblingOrigin(f *testing.F) {
	f.Add("http://5173--dev."+testDomain+":8080", "3000--dev."+testDomain+":8080")
	f.Add("https://3000--dev."+testDomain, "3000--dev."+testDomain)
	f.Add("http://5173--other."+testDomain, "3000--dev."+testDomain)
	f.Add("null", "3000--dev."+testDomain)
	f.Add("http://5173--DEV."+testDomain+".", "3000--dev."+testDomain)
	p, err := NewPreview(func(context.Context, string, int) (net.Conn, error) { return nil, ErrHostUnavailable }, &PreviewConfig{Domain: testDomain})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, origin, host string) {
		id, port, ok := parseSubdomain(host, testDomain)
		if !ok {
			return
		}
		r := &http.Request{Header: http.Header{"Origin": {origin}}, Host: host}
		got, ok := p.siblingOrigin(r, target{hostID: id, port: port})
		if !ok {
			return
		}
		u, err := url.Parse(got)
		if got != origin || err != nil || u.Scheme != "http" && u.Scheme != "https" {
			t.Fatalf("origin %q for %q: answered %q (%v)", origin, host, got, err)
		}
		oid, oport, ok := parseSubdomain(u.Host, testDomain)
		if !ok || oid != id || oport == port {
			t.Fatalf("origin %q let in for %q: its preview is %q port %d", origin, host, oid, oport)
		}
	})
}
