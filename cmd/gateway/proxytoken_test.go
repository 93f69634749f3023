//go:build unix

package main

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
)

// HOSTGATE_TOKEN made of a token file keeps the file's newline (an env
// file, a secret mounted as a variable): the proxy reaches the host with
// it all the same, as agent connect does.
func TestProxyTokenWithTrailingNewline(t *testing.T) {
	ctx := testCtx(t)
	base, agentTok, clientTok := serveHost(t, ctx, "box")
	defer runAgent(t, ctx, base, agentTok)()
	t.Setenv("HOSTGATE_TOKEN", clientTok+"\n")

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	perr := make(chan error, 1)
	go func() {
		perr <- run(ctx, stdio{in: inR, out: outW, err: &stderr}, []string{"proxy", "--url", base, "box"})
		_ = outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	_ = inW.Close()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	perrv := <-perr
	if err != nil || !strings.HasPrefix(line, "SSH-2.0-") {
		t.Fatalf("the host's first line through the proxy: %q %v (proxy: %v, stderr %q)", line, err, perrv, stderr.String())
	}
}
