package agent

import (
	"context"
	"strings"
	"testing"
)

// A --gateway URL with credentials before its '@' (a reverse proxy's basic
// auth) is refused, naming --gateway and quoting none of it: the agent
// never sent them (its bearer token is the request's Authorization), and
// it wrote the URL whole into every log line (gateway=…) and into the
// errors of a URL it refused, a journal many may read.
func TestGatewayURLCredentialsRefused(t *testing.T) {
	const secret = "s3cretpw"
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // an accepted URL makes Connect return at its first dial
	for _, u := range []string{
		"https://user:" + secret + "@127.0.0.1:1",
		"https://" + secret + "@127.0.0.1:1",
		"wss://user:" + secret + "@127.0.0.1:1/base",
		"https://user:" + secret + "%zz@127.0.0.1:1", // a bad escape: url.Parse quotes it
		secret + ":x@127.0.0.1:1",                    // parses as the scheme s3cretpw
	} {
		var logs syncBuffer
		err := RunConnect(ctx, []string{"--gateway", u, "--token", "hg_x", "--state-dir", t.TempDir()}, nil, &logs)
		if err == nil {
			t.Errorf("--gateway with credentials accepted; logs:\n%s", logs.String())
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
			t.Errorf("the credentials are quoted: %v\n%s", err, logs.String())
		}
		if !strings.Contains(err.Error(), "--gateway") {
			t.Errorf("the error does not name --gateway: %v", err)
		}
	}
}
