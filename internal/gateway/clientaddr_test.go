package gateway

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/store"
)

func mustProxies(t testing.TB, s string) []netip.Prefix {
	t.Helper()
	p, err := ParseTrustedProxies(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseTrustedProxies(t *testing.T) {
	p := mustProxies(t, " 10.0.0.0/8, 127.0.0.1 ,::1,fd00::/8,")
	if len(p) != 4 || p[1].Bits() != 32 || p[2].Bits() != 128 {
		t.Fatalf("parsed %v", p)
	}
	for _, bad := range []string{"10.0.0.0/33", "gw.example.com", "1.2.3"} {
		if _, err := ParseTrustedProxies(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestForwardedClient(t *testing.T) {
	proxies := mustProxies(t, "10.0.0.0/8")
	for _, tc := range []struct {
		values []string
		want   string // "" = no answer
	}{
		{[]string{"203.0.113.7"}, "203.0.113.7"},
		{[]string{"198.51.100.1, 203.0.113.7"}, "203.0.113.7"}, // the client may prepend anything
		{[]string{"203.0.113.7, 10.1.2.3"}, "203.0.113.7"},     // past a second trusted proxy
		{[]string{"203.0.113.7", "10.1.2.3"}, "203.0.113.7"},   // several headers
		{[]string{"[2001:db8::1]:4711"}, "2001:db8::1"},
		{[]string{"203.0.113.7:4711"}, "203.0.113.7"},
		{[]string{"::ffff:203.0.113.7"}, "203.0.113.7"},
		{[]string{"10.1.2.3"}, ""},             // only proxies
		{[]string{"203.0.113.7, garbage"}, ""}, // a bad entry ends the walk
		{nil, ""},
		{[]string{strings.Repeat("198.51.100.1, ", 500) + "203.0.113.7, 10.1.2.3"}, "203.0.113.7"}, // padding on the left changes nothing
	} {
		ap, ok := forwardedEntry(tc.values, proxies)
		got := ap.Addr()
		if (tc.want == "") != !ok || (ok && got.String() != tc.want) {
			t.Errorf("%q: %v %v, want %q", tc.values, got, ok, tc.want)
		}
	}
}

func FuzzForwardedEntry(f *testing.F) {
	f.Add("203.0.113.7, 10.1.2.3", "10.0.0.0/8")
	f.Add("[2001:db8::1]:80,,", "::1")
	f.Fuzz(func(t *testing.T, header, trustedList string) {
		proxies, err := ParseTrustedProxies(trustedList)
		if err != nil {
			return
		}
		ap, ok := forwardedEntry([]string{header}, proxies)
		a := ap.Addr()
		if !ok {
			return
		}
		if !a.IsValid() || trusted(proxies, a) || a.Zone() != "" {
			t.Fatalf("%q with %v: got %v", header, proxies, a)
		}
	})
}

// TestRateLimitBehindProxy: behind a trusted proxy each client has its own
// failure budget (one guesser does not lock out the rest); a client that
// is not a trusted proxy cannot dodge its budget by sending the header.
func TestRateLimitBehindProxy(t *testing.T) {
	try := func(e *env, token, xff string) int {
		req, err := http.NewRequestWithContext(e.ctx, "GET", e.ts.URL+"/v1/hosts", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	e := newEnv(t, &Config{AuthFailureLimit: 3, TrustedProxies: mustProxies(t, "127.0.0.0/8")})
	good := e.token(store.RoleAdmin)
	for range 3 {
		if code := try(e, "hg_guess", "203.0.113.7"); code != 401 {
			t.Fatalf("guess: %d", code)
		}
	}
	if code := try(e, good, "203.0.113.7"); code != 429 {
		t.Fatalf("the guesser after its budget: %d, want 429", code)
	}
	if code := try(e, good, "198.51.100.9"); code != 200 {
		t.Fatalf("another client behind the same proxy: %d, want 200", code)
	}

	e2 := newEnv(t, &Config{AuthFailureLimit: 3}) // no trusted proxy
	for i := range 3 {
		_ = try(e2, "hg_guess", "203.0.113."+string(rune('1'+i)))
	}
	if code := try(e2, good, "198.51.100.9"); code != 429 {
		t.Fatalf("a direct client rotating X-Forwarded-For: %d, want 429", code)
	}
}

// TestCallerHeader: the caller a stream names to the host is the client
// the rate limits and logs see, with its port where known: the peer's own
// for a direct client, the X-Forwarded-For entry's (seldom there: 0
// otherwise) behind a trusted proxy; the gateway's address as Dst.
func TestCallerHeader(t *testing.T) {
	s := &Server{cfg: Config{TrustedProxies: mustProxies(t, "10.0.0.0/8")}}
	local := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080}
	for _, tc := range []struct {
		peer, xff, want string
	}{
		{"198.51.100.9:5000", "", "PROXY TCP4 198.51.100.9 127.0.0.1 5000 8080"},
		{"198.51.100.9:5000", "203.0.113.7", "PROXY TCP4 198.51.100.9 127.0.0.1 5000 8080"}, // not a trusted proxy
		{"10.1.2.3:5000", "203.0.113.7", "PROXY TCP4 203.0.113.7 127.0.0.1 0 8080"},
		{"10.1.2.3:5000", "203.0.113.7:4711", "PROXY TCP4 203.0.113.7 127.0.0.1 4711 8080"},
		{"10.1.2.3:5000", "[2001:db8::1]:4711", "PROXY TCP6 2001:db8::1 :: 4711 0"},
		// The port is the named entry's, the right-most: one the client
		// prepended, naming its own address with a port it chose, is not
		// (in one header or in an earlier one).
		{"10.1.2.3:5000", "203.0.113.7:4711, 203.0.113.7", "PROXY TCP4 203.0.113.7 127.0.0.1 0 8080"},
		{"10.1.2.3:5000", "203.0.113.7:4711, 203.0.113.7:5555", "PROXY TCP4 203.0.113.7 127.0.0.1 5555 8080"},
		{"10.1.2.3:5000", "203.0.113.7:4711\n203.0.113.7", "PROXY TCP4 203.0.113.7 127.0.0.1 0 8080"},
		{"[::ffff:198.51.100.9]:5000", "", "PROXY TCP4 198.51.100.9 127.0.0.1 5000 8080"},
		{"pipe", "", "PROXY UNKNOWN"},
	} {
		r := httptest.NewRequest("GET", "/v1/hosts/h/ssh", nil)
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, local))
		r.RemoteAddr = tc.peer
		for v := range strings.SplitSeq(tc.xff, "\n") { // one header a line
			if v != "" {
				r.Header.Add("X-Forwarded-For", v)
			}
		}
		if got := callerOf(s.WithCaller(context.Background(), r)).String(); got != tc.want {
			t.Errorf("peer %s, X-Forwarded-For %q: %q, want %q", tc.peer, tc.xff, got, tc.want)
		}
	}
	if got := callerOf(context.Background()).String(); got != "PROXY UNKNOWN" {
		t.Errorf("no caller: %q", got)
	}
}
