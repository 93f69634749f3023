package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestProxyURLErrorsQuoteNoCredentials: ssh shows gateway proxy's stderr,
// in a terminal or a CI job's log. A --url (HOSTGATE_URL) holding a token
// before its '@' that the proxy refused was quoted whole (a parse error,
// a scheme it does not take), token and all, and the refusal did not say
// it was --url's; each now names --url, says what is wrong, and quotes
// no secret. Relayed or
// not, the same.
func TestProxyURLErrorsQuoteNoCredentials(t *testing.T) {
	ctx := testCtx(t)
	for _, u := range []string{
		"ftp://SECRET@gw.example",
		"https://SECRET@gw.example/%zz",
		"SECRET@gw.example",
		"SECRET:x@gw.example",
		"https://u:SECRET@gw.example",
		"https://SECRET@gw.example",
		"https:///v1",
	} {
		for _, mode := range []string{"--relay-only=false", "--relay-only"} {
			var stderr bytes.Buffer
			err := run(ctx, stdio{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &stderr}, []string{"proxy", mode, "--url", u, "--token", "t", "box"})
			if err == nil {
				t.Fatalf("--url %q: no error", u)
			}
			if msg := stderr.String(); strings.Contains(msg, "SECRET") || !strings.Contains(msg, "--url") {
				t.Errorf("--url %q %s: %q quotes the credentials or does not name --url", u, mode, msg)
			}
		}
	}
}
