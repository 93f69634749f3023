package client

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/hostgate/hostgate/internal/testenv"
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
		{"https://me:pw@gw", "t", `client: gateway URL "https://xxxxx@gw" holds credentials, which are never sent`},
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

// TestNewErrorsQuoteNoURLCredentials: a gateway URL holding credentials
// is refused without quoting them, whichever of its faults New names. Only
// the refusal of the credentials themselves hid the password, and it kept
// the user name, where a token stands in git's https://TOKEN@host form;
// the refusals of a scheme, a missing host or a bad escape quoted the URL
// as given, so the program's log got the secret.
func TestNewErrorsQuoteNoURLCredentials(t *testing.T) {
	for _, raw := range []string{
		"https://hg_secret@gw",
		"https://me:hg_secret@gw",
		"ftp://me:hg_secret@gw",
		"http://me:hg_secret@gw/%zz",
		"ws://me:hg_secret@",
		"me:hg_secret@gw:8080",
	} {
		_, err := New(raw, "t", nil)
		if err == nil || !strings.Contains(err.Error(), "gateway URL") {
			t.Errorf("New(%q): %v, want the gateway URL refused", raw, err)
			continue
		}
		if strings.Contains(err.Error(), "hg_secret") {
			t.Errorf("New(%q): %v, which quotes the URL's credentials", raw, err)
		}
	}
}

// TestGatewayNotRunningSaysSo: a call to a gateway URL where nothing
// listens says that no gateway answers there and what to check, beside
// net/http's "connection refused": an agent runtime started before
// gateway dev read only `Get "http://…/v1/hosts/local": dial tcp …:
// connect: connection refused`.
func TestGatewayNotRunningSaysSo(t *testing.T) {
	url := "http://" + testenv.RefusedAddr(t)
	c, err := New(url, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Hosts(t.Context())
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Hosts of a gateway not running: %v, want connection refused", err)
	}
	if want := "no gateway answers at " + url + ": is it running, and is that its URL?"; !strings.Contains(err.Error(), want) {
		t.Errorf("Hosts of a gateway not running: %q, want it to say %q", err, want)
	}
	if _, err := Dial(t.Context(), url, "tok", "box"); err == nil || !strings.Contains(err.Error(), "no gateway answers at "+url) {
		t.Errorf("Dial through a gateway not running: %v, want it to say so", err)
	}
}
