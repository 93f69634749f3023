package client

import (
	"strings"
	"testing"
)

// New's errors name the argument at fault and what it wants: an empty
// token was taken (every call then answered 401), a token with a newline
// failed each call with net/http's "invalid header field value", and
// "gw.example.com:8080" was refused for its scheme "gw.example.com". A
// token is never quoted.
func TestNewErrorsNameTheArgument(t *testing.T) {
	for _, c := range []struct{ url, token, want string }{
		{"", "t", `client: no gateway URL: want the gateway's base URL, such as https://gw.example.com or http://127.0.0.1:8080`},
		{"gw.example.com:8080", "t", `client: gateway URL "gw.example.com:8080" has no scheme: want https://gw.example.com:8080 (or http:// for a gateway without TLS)`},
		{"ftp://gw", "t", `client: gateway URL "ftp://gw": scheme "ftp"; want http://, https://, ws:// or wss://`},
		{"http://", "t", `client: gateway URL "http://" has no host: want the gateway's base URL`},
		{"https://me:pw@gw", "t", `client: gateway URL "https://me:xxxxx@gw" holds credentials, which are never sent`},
		{"https://gw/?token=x", "t", `client: gateway URL "https://gw/?token=x" has a query or fragment, which its API paths would drop`},
		{"http://gw/%zz", "t", `client: gateway URL "http://gw/%zz": invalid URL escape "%zz"; want the gateway's base URL`},
		{"https://gw", "", "client: no token: pass a token from `gateway token create`"},
		{"https://gw", "hg_secret\n", "client: the token holds whitespace or a control character around it (a newline left by reading it from a file?), which an Authorization header cannot carry: trim it"},
		{"https://gw", "hg_se cret", "client: the token holds whitespace or a control character at byte 5 of 10"},
	} {
		_, err := New(c.url, c.token, nil)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("New(%q, %q): %v\nwant it to start %q", c.url, c.token, err, c.want)
		}
		if err != nil && c.token != "t" && c.token != "" && strings.Contains(err.Error(), "secret") {
			t.Errorf("New's error quotes the token: %v", err)
		}
	}
	for _, u := range []string{"http://gw", "HTTPS://gw/", "ws://127.0.0.1:8080", "wss://gw/prefix"} {
		if _, err := New(u, "hg_x", nil); err != nil {
			t.Errorf("New(%q): %v", u, err)
		}
	}
}
