package execapi

import (
	"bytes"
	"encoding/base64"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/gateway/wire"
)

// binaryInput is every byte value, then sequences that are not UTF-8: a
// lone continuation byte, a truncated sequence, an overlong NUL, a
// surrogate, and a sequence cut at the end.
func binaryInput() []byte {
	b := make([]byte, 0, 300)
	for i := range 256 {
		b = append(b, byte(i))
	}
	return append(b, 0x80, 'a', 0xe2, 0x82, 'b', 0xc0, 0x80, 0xed, 0xa0, 0x80, 0xf0, 0x9f, 0x98)
}

// TestExecBinaryBase64: with "encoding": "base64" stdin, stdout and stderr
// carry any bytes, and the answer names its encoding. The API used to
// answer JSON strings only, in which encoding/json turns every byte that is
// not UTF-8 into U+FFFD, silently.
func TestExecBinaryBase64(t *testing.T) {
	f := newFixture(t)
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	in := binaryInput()
	status, body := f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", map[string]any{
		"command": "tee", "stdin": base64.StdEncoding.EncodeToString(in), "timeoutMs": 1000, "encoding": "base64"})
	if status != http.StatusOK || body["encoding"] != "base64" {
		t.Fatalf("exec: %d %v, want 200 naming encoding base64", status, body)
	}
	out, err := base64.StdEncoding.DecodeString(body["stdout"].(string))
	if err != nil || !bytes.Equal(out, in) {
		t.Fatalf("stdout: %v, %x; want %x", err, out, in)
	}
	want := append([]byte("err:"), in...)
	if errOut, err := base64.StdEncoding.DecodeString(body["stderr"].(string)); err != nil || !bytes.Equal(errOut, want) {
		t.Fatalf("stderr: %v, %x; want %x", err, errOut, want)
	}
	if _, ok := body["stdoutLossy"]; ok {
		t.Fatalf("a base64 answer says it is lossy: %v", body)
	}
}

// TestExecDefaultEncodingSaysLossy: without an encoding the answer is as
// it always was for text, and says so when the output was not UTF-8 (the
// JSON string then holds U+FFFD where the bytes were).
func TestExecDefaultEncodingSaysLossy(t *testing.T) {
	f := newFixture(t)
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	status, body := f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", map[string]any{"command": "tee", "stdin": "héllo ✓\n", "timeoutMs": 1000})
	if status != http.StatusOK || body["stdout"] != "héllo ✓\n" {
		t.Fatalf("text exec: %d %v", status, body)
	}
	for _, k := range []string{"encoding", "stdoutLossy", "stderrLossy"} {
		if _, ok := body[k]; ok {
			t.Errorf("text exec answers %s: %v; want the answer as it always was", k, body)
		}
	}
	// A JSON request's stdin is text: the fake's "binary" prints bytes
	// that are not.
	status, body = f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", map[string]any{"command": "binary", "timeoutMs": 1000})
	if status != http.StatusOK || body["stdoutLossy"] != true || body["stderrLossy"] != true {
		t.Fatalf("binary output in the default encoding: %d %v, want stdoutLossy and stderrLossy", status, body)
	}
	if _, ok := body["encoding"]; ok {
		t.Errorf("default encoding answers encoding: %v", body)
	}
	status, body = f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", map[string]any{"command": "tee", "stdin": "ok", "timeoutMs": 1000, "encoding": "utf-8"})
	if status != http.StatusOK || body["stdout"] != "ok" || body["encoding"] != "utf-8" || body["stdoutLossy"] != nil {
		t.Fatalf("text in encoding utf-8, named: %d %v", status, body)
	}
}

// TestExecEncodingRefusals: a stdin that is not base64 is a 400 naming
// stdin; an unknown encoding a 400 naming the ones accepted. Neither runs
// anything.
func TestExecEncodingRefusals(t *testing.T) {
	f := newFixture(t)
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	for _, tc := range []struct {
		name        string
		body        map[string]any
		field, want string
	}{
		{"bad base64", map[string]any{"command": "engine-down", "stdin": "not base64!", "encoding": "base64", "timeoutMs": 1000}, "stdin", "base64"},
		{"unpadded", map[string]any{"command": "engine-down", "stdin": "YQ", "encoding": "base64", "timeoutMs": 1000}, "stdin", "base64"},
		{"url alphabet", map[string]any{"command": "engine-down", "stdin": "-_-_", "encoding": "base64", "timeoutMs": 1000}, "stdin", "base64"},
		{"unknown", map[string]any{"command": "engine-down", "encoding": "hex", "timeoutMs": 1000}, "encoding", `"utf-8" (the default) or "base64"`},
		{"wrong case", map[string]any{"command": "engine-down", "encoding": "BASE64", "timeoutMs": 1000}, "encoding", `"base64"`},
	} {
		status, body := f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", tc.body)
		code, msg := errCode(body)
		if status != http.StatusBadRequest || code != "invalid_request" || !strings.HasPrefix(msg, tc.field+": ") || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %d %q %q, want 400 naming %s and %s", tc.name, status, code, msg, tc.field, tc.want)
		}
	}
}

// answer is res on the wire in encoding, as encoding/json would write
// it whole: what writeAnswer must write.
func answer(res *dockerhost.ExecResult, encoding string) execAnswer {
	a := execAnswer{ExecResult: *res, Encoding: encoding}
	if encoding == encodingBase64 {
		a.Stdout = base64.StdEncoding.EncodeToString([]byte(res.Stdout))
		a.Stderr = base64.StdEncoding.EncodeToString([]byte(res.Stderr))
		return a
	}
	a.StdoutLossy = !utf8.ValidString(res.Stdout)
	a.StderrLossy = !utf8.ValidString(res.Stderr)
	return a
}

// outputOf is res as dockerhost keeps it.
func outputOf(res *dockerhost.ExecResult) *dockerhost.ExecOutput {
	return &dockerhost.ExecOutput{ExitCode: res.ExitCode, Stdout: dockerhost.OutputOf([]byte(res.Stdout)), Stderr: dockerhost.OutputOf([]byte(res.Stderr)), DurationMs: res.DurationMs, OOMKilled: res.OOMKilled}
}

// writeAnswer's bytes are WriteJSON's, for every byte value, invalid and
// cut UTF-8, the characters encoding/json escapes and both encodings,
// read whole or a byte at a time (every rune cut between two reads).
func TestWriteAnswerSameAsWriteJSON(t *testing.T) {
	outputs := []string{"", "plain\n", string(binaryInput()), `"q" \ <a href="x">&amp;</a>`, "\u2028\u2029\u2027\u202a", "é😀中", "\xff\xfe\xed\xa0\x80", "\x00x\x00", "hostgate:stdout", stdoutMark + stderrMark}
	// And strings of random bytes from the ones that matter.
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "\x00", "\x1f", "\x7f", "<", "&", "\"", "\\", "\n", "\b", "\xe2", "\x80", "\xa8", "\xf0\x9f", "\x98\x80", "\u2028", "é", "\xff"}
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(24) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		outputs = append(outputs, b.String())
	}
	for _, out := range outputs {
		for _, errOut := range []string{"", out, "\x1b[31mred\x7f"} {
			for _, enc := range []string{"", encodingUTF8, encodingBase64} {
				res := &dockerhost.ExecResult{ExitCode: 137, Stdout: out, Stderr: errOut, DurationMs: 12, OOMKilled: true}
				want, got, gotBytes := httptest.NewRecorder(), httptest.NewRecorder(), httptest.NewRecorder()
				gateway.WriteJSON(want, http.StatusOK, answer(res, enc))
				writeAnswer(got, slog.New(slog.DiscardHandler), outputOf(res), enc)
				writeAnswerFrom(gotBytes, slog.New(slog.DiscardHandler), outputOf(res), iotest.OneByteReader(strings.NewReader(out)), iotest.OneByteReader(strings.NewReader(errOut)), enc)
				if !bytes.Equal(gotBytes.Body.Bytes(), want.Body.Bytes()) {
					t.Fatalf("read a byte at a time: stdout %q stderr %q encoding %q:\n got %q\nwant %q", out, errOut, enc, gotBytes.Body, want.Body)
				}
				if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) || got.Code != want.Code {
					t.Fatalf("stdout %q stderr %q encoding %q:\n got %d %q\nwant %d %q", out, errOut, enc, got.Code, got.Body, want.Code, want.Body)
				}
				for _, h := range []string{"Content-Type", "Cache-Control", "X-Content-Type-Options"} {
					if got.Header().Get(h) != want.Header().Get(h) {
						t.Fatalf("header %s: %q, want %q", h, got.Header().Get(h), want.Header().Get(h))
					}
				}
				// A cut command's error answer carries its output the same way.
				a := answer(res, enc)
				e := wire.Error{Code: "timeout", Message: "command ran longer than 5 ms; <the execution> was destroyed"}
				wantErr, gotErr := httptest.NewRecorder(), httptest.NewRecorder()
				gateway.WriteJSON(wantErr, http.StatusGatewayTimeout, wire.ExecCutErrorBody{Error: wire.ExecCutError{Error: e, Stdout: a.Stdout, Stderr: a.Stderr, Encoding: enc, StdoutLossy: a.StdoutLossy, StderrLossy: a.StderrLossy}})
				writeErrorOutput(gotErr, slog.New(slog.DiscardHandler), http.StatusGatewayTimeout, e, outputOf(res), enc)
				if !bytes.Equal(gotErr.Body.Bytes(), wantErr.Body.Bytes()) || gotErr.Code != wantErr.Code {
					t.Fatalf("error answer: stdout %q stderr %q encoding %q:\n got %d %q\nwant %d %q", out, errOut, enc, gotErr.Code, gotErr.Body, wantErr.Code, wantErr.Body)
				}
			}
		}
	}
}

// countingWriter is a ResponseWriter that keeps only the number of bytes.
type countingWriter struct {
	h http.Header
	n int
}

func (c *countingWriter) Header() http.Header         { return c.h }
func (c *countingWriter) WriteHeader(int)             {}
func (c *countingWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

// An answer is written as it is made: the gateway's memory for one is not
// a multiple of the output. Output of < or control characters, six bytes
// each in JSON, used to be encoded whole first: 63 MiB of NULs took 2.6
// GiB of allocations and a minute of CPU.
func TestWriteAnswerStreams(t *testing.T) {
	out := strings.Repeat("<\x00", 4<<20) // 8 MiB of output, 48 MiB of JSON
	res := outputOf(&dockerhost.ExecResult{Stdout: out, Stderr: out})
	w := &countingWriter{h: http.Header{}}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	writeAnswer(w, slog.New(slog.DiscardHandler), res, "")
	runtime.ReadMemStats(&after)
	if w.n < 12*len(out) {
		t.Fatalf("wrote %d bytes, want at least %d", w.n, 12*len(out))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("writing a %d-byte answer allocated %d bytes; want well under its %d bytes of output", w.n, alloc, 2*len(out))
	}
}

// hungUpWriter is a ResponseWriter whose caller went away: every write
// fails, as net/http's do once the connection is gone.
type hungUpWriter struct{ h http.Header }

func (c *hungUpWriter) Header() http.Header { return c.h }
func (c *hungUpWriter) WriteHeader(int)     {}
func (c *hungUpWriter) Write(p []byte) (int, error) {
	return 0, errors.New("write tcp 10.0.0.1:8080->10.0.0.2:51000: write: broken pipe")
}

// A caller that hangs up while its answer is written is the caller's
// doing: the gateway said at ERROR that reading the command's output
// failed (with the write's error) for a base64 answer larger than its
// buffer, where a read of the output had not failed at all. An output
// that cannot be read is still an ERROR.
func TestWriteAnswerCallerGoneNotAnError(t *testing.T) {
	out := strings.Repeat("x", 4*answerBuffer)
	for _, enc := range []string{"", encodingBase64} {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		writeAnswer(&hungUpWriter{h: http.Header{}}, log, outputOf(&dockerhost.ExecResult{Stdout: out, Stderr: out}), enc)
		if strings.Contains(logs.String(), "level=ERROR") || strings.Contains(logs.String(), "reading the command's output failed") {
			t.Errorf("encoding %q, caller gone: logged\n%s\nwant no error and no failed read", enc, logs.String())
		}
	}
	for _, enc := range []string{"", encodingBase64} {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		res := outputOf(&dockerhost.ExecResult{})
		writeAnswerFrom(&countingWriter{h: http.Header{}}, log, res, iotest.ErrReader(errors.New("spool: read: input/output error")), strings.NewReader(""), enc)
		if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "input/output error") {
			t.Errorf("encoding %q, output unreadable: logged\n%s\nwant an ERROR naming the read's error", enc, logs.String())
		}
	}
}
