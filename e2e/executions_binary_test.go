package e2e

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"encoding/hex"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/client"
)

// binaryBytes is every byte value, then sequences that are not UTF-8: a
// lone continuation byte, a truncated sequence, an overlong NUL, a UTF-16
// surrogate, and a sequence cut at the end.
func binaryBytes() []byte {
	b := make([]byte, 0, 300)
	for i := range 256 {
		b = append(b, byte(i))
	}
	return append(b, 0x80, 'a', 0xe2, 0x82, 'b', 0xc0, 0x80, 0xed, 0xa0, 0x80, 0xf0, 0x9f, 0x98)
}

// TestExecBinary: with "encoding": "base64" any bytes go in as stdin and
// come back as stdout and stderr intact, through the gateway, the
// execution's agent and a real container; without it, an answer that lost
// bytes says so. The API used to answer JSON strings only, in which every
// byte that is not UTF-8 became U+FFFD, with no sign: `cat image.png`,
// `gzip -c` and `tar -c` came back corrupted.
func TestExecBinary(t *testing.T) {
	_, c, image := execGateway(t)
	ctx := testCtx(t, 5*time.Minute)
	e := provision(t, ctx, c, execRequest(image)) // maxOutputBytes 256 KiB
	run := func(script, stdin, encoding string) *client.ExecResult {
		t.Helper()
		res, err := c.Exec(ctx, e.ExecutionID, client.ExecRequest{Command: "/bin/sh", Args: []string{"-c", script}, Stdin: stdin, Encoding: encoding, TimeoutMs: 60000})
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		if res.ExitCode != 0 {
			t.Fatalf("exec %q: exit %d, stderr %q", script, res.ExitCode, res.Stderr)
		}
		return res
	}

	in := binaryBytes()
	res := run("cat > b && cat b && cat b >&2", string(in), client.EncodingBase64)
	if res.Stdout != string(in) || res.Stderr != string(in) || res.Encoding != "base64" {
		t.Fatalf("binary through stdin, stdout and stderr:\nstdout %x\nstderr %x\nwant   %x", res.Stdout, res.Stderr, in)
	}
	if out := run("od -An -tx1 -v b | tr -d ' \\n'", "", ""); out.Stdout != hex.EncodeToString(in) {
		t.Fatalf("the file stdin wrote holds %s, want %x", out.Stdout, in)
	}

	// The default encoding is text, as it always was; an answer that lost
	// bytes now says so.
	res = run("cat b", "", "")
	if !res.StdoutLossy || res.StderrLossy || !strings.Contains(res.Stdout, "\uFFFD") || res.Encoding != "" {
		t.Fatalf("binary output as text: %+v, want stdoutLossy only", res)
	}
	if res := run("echo héllo", "", ""); res.Stdout != "héllo\n" || res.StdoutLossy {
		t.Fatalf("text output: %+v", res)
	}

	// What a real tool writes: gzip's stream decompresses to the input.
	res = run("gzip -c b", "", client.EncodingBase64)
	zr, err := gzip.NewReader(strings.NewReader(res.Stdout))
	if err != nil {
		t.Fatalf("gzip -c output: %v", err)
	}
	if back, err := io.ReadAll(zr); err != nil || !bytes.Equal(back, in) {
		t.Fatalf("gunzip of gzip -c: %v, %x; want %x", err, back, in)
	}

	// The output limit counts raw bytes: 200000 of them, 266668 as base64,
	// pass a 256 KiB limit.
	res = run("head -c 200000 /dev/urandom > r && md5sum < r >&2 && cat r", "", client.EncodingBase64)
	sum := md5.Sum([]byte(res.Stdout))
	if len(res.Stdout) != 200000 || !strings.HasPrefix(res.Stderr, hex.EncodeToString(sum[:])) {
		t.Fatalf("200000 random bytes: got %d, md5 %x, the container's %q", len(res.Stdout), sum, res.Stderr)
	}
}
