package forward

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// target is where one preview request goes.
type target struct {
	hostID string
	port   int
	// prefix is the path-form prefix ("/preview/h/3000"), empty for the
	// subdomain form.
	prefix string
	// rawPath is the escaped upstream path (starts with "/").
	rawPath string
}

// maxHostID bounds a host id; DNS labels stop at 63 bytes, path ids at this.
const maxHostID = 128

// validHostID accepts the host ids the path form can carry: ASCII letters,
// digits, '.', '_' and '-', not "." or "..".
func validHostID(id string) error {
	if id == "" || len(id) > maxHostID || id == "." || id == ".." {
		return fmt.Errorf("forward: host id %q: want 1-%d characters", id, maxHostID)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("forward: host id %q: byte %#x not allowed", id, c)
		}
	}
	return nil
}

// parsePort accepts 1-65535 in canonical decimal (no sign, no leading zero),
// so that one port has one URL and one authorization decision.
func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, false
	}
	return n, true
}

// parseSubdomain reads "{port}--{host}.{domain}" (with an optional ":port"
// suffix on the request host). DNS is case-insensitive, and browsers
// lower-case host names, so the host label is lowercased: PreviewConfig.
// ResolveHost finds the id with capitals it stands for.
func parseSubdomain(reqHost, domain string) (hostID string, port int, ok bool) {
	if domain == "" || len(reqHost) > 300 {
		return "", 0, false
	}
	h := reqHost
	if hh, _, err := net.SplitHostPort(reqHost); err == nil {
		h = hh
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	label, found := strings.CutSuffix(h, "."+strings.ToLower(domain))
	if !found || strings.Contains(label, ".") {
		return "", 0, false
	}
	p, id, found := strings.Cut(label, "--")
	if !found || len(id) > 63 {
		return "", 0, false
	}
	port, ok = parsePort(p)
	if !ok || validHostID(id) != nil || strings.HasPrefix(id, "-") || strings.HasSuffix(id, "-") {
		return "", 0, false
	}
	return id, port, true
}

// looksLikeSubdomain reports whether reqHost, under domain, is meant as a
// preview's subdomain ("{port}--{host}") that parseSubdomain refuses: a
// bad port, a host id a DNS label cannot carry, more labels. Such a
// request gets the preview's 404, not the gateway's own pages; names
// without "--" stay the gateway's, in case it serves under the domain.
func looksLikeSubdomain(reqHost, domain string) bool {
	if domain == "" {
		return false
	}
	h := reqHost
	if hh, _, err := net.SplitHostPort(reqHost); err == nil {
		h = hh
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	labels, found := strings.CutSuffix(h, "."+strings.ToLower(domain))
	return found && strings.Contains(labels, "--")
}

// ParseSubdomain reads a subdomain-form preview host name ("{port}--{host}.
// {domain}", with an optional ":port"): the host id (lower case) and port,
// and whether reqHost is one.
func ParseSubdomain(reqHost, domain string) (hostID string, port int, ok bool) {
	return parseSubdomain(reqHost, domain)
}

// SubdomainHost returns the subdomain-form host name of a preview, for
// links: SubdomainHost("local", 3000, "preview.localhost") is
// "3000--local.preview.localhost". Only for ids SubdomainCarries.
func SubdomainHost(hostID string, port int, domain string) string {
	return strconv.Itoa(port) + "--" + strings.ToLower(hostID) + "." + domain
}

// SubdomainCarries reports whether a DNS label can carry hostID, so that
// its previews have a subdomain form: at most 63 bytes, no '.' or '_', not
// starting or ending with '-'. Other ids have only the path form, and a
// link to their subdomain leads nowhere. (An id with capitals is carried
// lower-cased; PreviewConfig.ResolveHost finds it again.)
func SubdomainCarries(hostID string) bool {
	const domain = "preview.invalid"
	id, _, ok := parseSubdomain(SubdomainHost(hostID, 1, domain), domain)
	return ok && strings.EqualFold(id, hostID) && !strings.Contains(hostID, "_")
}

// ParsePreviewPath reads a path-form preview's escaped path
// ("{prefix}{host}/{port}/{rest}"): the host id, the port and the escaped
// path the dev server gets (starting with "/"), and whether escaped is one.
// A path without the slash after the port is not: the preview redirects it.
func ParsePreviewPath(escaped, prefix string) (hostID string, port int, rest string, ok bool) {
	t, err := parsePreviewPath(escaped, prefix)
	if err != nil {
		return "", 0, "", false
	}
	return t.hostID, t.port, t.rawPath, true
}

var errNoPreview = errors.New("forward: not a preview path")

// parsePreviewPath reads "{prefix}{host}/{port}{rest}" from an escaped path.
// It returns errNeedSlash for "{prefix}{host}/{port}" without the slash.
func parsePreviewPath(escaped, prefix string) (target, error) {
	rest, ok := strings.CutPrefix(escaped, prefix)
	if !ok {
		return target{}, errNoPreview
	}
	id, rest, ok := strings.Cut(rest, "/")
	if !ok || validHostID(id) != nil {
		return target{}, errNoPreview
	}
	p, rest, slash := strings.Cut(rest, "/")
	port, ok := parsePort(p)
	if !ok {
		return target{}, errNoPreview
	}
	t := target{hostID: id, port: port, prefix: prefix + id + "/" + p, rawPath: "/" + rest}
	if !slash {
		return t, errNeedSlash
	}
	return t, nil
}

var errNeedSlash = errors.New("forward: preview path needs a trailing slash")

// stripCookies removes the named cookies from every Cookie header of h and
// drops the header when nothing is left.
func stripCookies(h http.Header, names ...string) {
	lines := h.Values("Cookie")
	if len(lines) == 0 {
		return
	}
	var kept []string
	for _, line := range lines {
		for part := range strings.SplitSeq(line, ";") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			name, _, _ := strings.Cut(part, "=")
			if isOneOf(strings.TrimSpace(name), names) {
				continue
			}
			kept = append(kept, part)
		}
	}
	h.Del("Cookie")
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}

// stripSetCookies removes Set-Cookie headers that would plant one of the
// named cookies: a dev server must not set the gateway's session.
func stripSetCookies(h http.Header, names ...string) {
	lines := h.Values("Set-Cookie")
	if len(lines) == 0 {
		return
	}
	var kept []string
	for _, line := range lines {
		name, _, _ := strings.Cut(line, "=")
		if !isOneOf(strings.TrimSpace(name), names) {
			kept = append(kept, line)
		}
	}
	h["Set-Cookie"] = kept
	if len(kept) == 0 {
		h.Del("Set-Cookie")
	}
}

func isOneOf(s string, names []string) bool {
	for _, n := range names {
		if s == n {
			return true
		}
	}
	return false
}

// hostOnlyCookies takes the Domain off a subdomain preview's cookies: one
// for a parent domain reached every other preview, and the gateway when it
// sits under the same domain (40 of them made it answer 431 to every
// request).
//
// Every Domain attribute goes, as a browser reads attribute names, not
// only the one net/http would keep: it keeps the last, even an empty one
// ("Domain=x; Domain="), where a browser ignores the empty one and scopes
// the cookie to x.
func hostOnlyCookies(h http.Header) {
	rewriteSetCookies(h, func(attrs []string) ([]string, bool) {
		kept := attrs[:0:0]
		for _, av := range attrs {
			if !isAttr(av, "domain") {
				kept = append(kept, av)
			}
		}
		return kept, len(kept) != len(attrs)
	})
}

// namesDomain reports whether a Set-Cookie line has a Domain attribute,
// as a browser reads attribute names (case-insensitive, trimmed).
func namesDomain(line string) bool {
	_, attrs, _ := strings.Cut(line, ";")
	for av := range strings.SplitSeq(attrs, ";") {
		if isAttr(av, "domain") {
			return true
		}
	}
	return false
}

// isAttr reports whether av, one attribute of a Set-Cookie line, is named
// name (lower case) as a browser reads it.
func isAttr(av, name string) bool {
	n, _, _ := strings.Cut(av, "=")
	return strings.EqualFold(strings.TrimSpace(n), name)
}

// scopeCookies confines the dev server's cookies to the path-form prefix, so
// that a path-form preview's cookies reach neither the gateway nor other
// previews on the same origin: each line's Domain and Path attributes give
// way to one Path under the prefix.
//
// A path already inside the prefix stays: a dev server that honours
// X-Forwarded-Prefix scopes its cookies to it (a servlet container's
// session cookie takes the context path), and the prefix put in front
// again left a cookie the browser never sent back.
func scopeCookies(h http.Header, prefix string) {
	rewriteSetCookies(h, func(attrs []string) ([]string, bool) {
		// As a browser reads it: the last Path attribute counts, and one
		// that does not start with '/' is none.
		path := "/"
		kept := attrs[:0:0]
		for _, av := range attrs {
			switch {
			case isAttr(av, "path"):
				_, v, _ := strings.Cut(av, "=")
				if path = strings.TrimSpace(v); !strings.HasPrefix(path, "/") {
					path = "/"
				}
			case !isAttr(av, "domain") && strings.TrimSpace(av) != "":
				kept = append(kept, av)
			}
		}
		if rest, ok := strings.CutPrefix(path, prefix); !ok || rest != "" && rest[0] != '/' {
			path = prefix + path
		}
		return append(kept, " Path="+path), true
	})
}

// rewriteSetCookies passes the attributes of each Set-Cookie of h through
// edit. The rest of a line stays as the dev server wrote it: browsers take
// names and values net/http refuses (the backslash-escaped quotes of
// Python's cookies, PHP's cart[1]) or writes otherwise (it quotes a value
// with a space or a comma), and attributes it does not know (Priority).
// A line edit leaves as it was stays word for word. One without a name
// and '=' is dropped: a browser would make it a cookie without a name.
func rewriteSetCookies(h http.Header, edit func(attrs []string) ([]string, bool)) {
	lines := h.Values("Set-Cookie")
	if len(lines) == 0 {
		return
	}
	kept := make([]string, 0, len(lines))
	for _, line := range lines {
		parts := strings.Split(line, ";")
		if name, _, ok := strings.Cut(parts[0], "="); !ok || strings.TrimSpace(name) == "" {
			continue
		}
		attrs, changed := edit(parts[1:])
		if !changed {
			kept = append(kept, line)
			continue
		}
		kept = append(kept, strings.Join(append([]string{parts[0]}, attrs...), ";"))
	}
	h.Del("Set-Cookie")
	for _, s := range kept {
		h.Add("Set-Cookie", s)
	}
}
