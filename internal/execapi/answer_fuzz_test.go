package execapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/iotest"

	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/gateway"
)

// chunkReader returns at most n bytes a read, the last of them with
// io.EOF when dataEOF (as some readers do), so that a rune is cut
// wherever the fuzzer puts n.
type chunkReader struct {
	b       []byte
	n       int
	dataEOF bool
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], r.b)
	r.b = r.b[k:]
	if r.dataEOF && len(r.b) == 0 {
		return k, io.EOF
	}
	return k, nil
}

// FuzzWriteAnswer: a command's output is whatever bytes the sandbox
// wrote, and writeAnswer escapes them itself, streaming, in place of
// encoding/json. Its answer must be WriteJSON's of the same result byte
// for byte, in both encodings, however the output's reads cut it.
func FuzzWriteAnswer(f *testing.F) {
	f.Add([]byte("plain\n"), []byte("\x1b[31mred\x7f"), uint8(0), uint8(3), false)
	f.Add(binaryInput(), []byte(stdoutMark+stderrMark), uint8(1), uint8(0), true)
	f.Add([]byte("é😀中\u2028\u2029\xed\xa0\x80"), []byte(`"q" \ <a>&amp;`), uint8(0), uint8(1), true)
	f.Add([]byte("\xf0\x9f\x98"), []byte("\xe2\x80"), uint8(2), uint8(2), false)
	f.Fuzz(func(t *testing.T, stdout, stderr []byte, encSel, chunk uint8, dataEOF bool) {
		enc := []string{"", encodingUTF8, encodingBase64}[int(encSel)%3]
		res := &dockerhost.ExecResult{ExitCode: 1, Stdout: string(stdout), Stderr: string(stderr), DurationMs: 7}
		want := httptest.NewRecorder()
		gateway.WriteJSON(want, http.StatusOK, answer(res, enc))
		got := httptest.NewRecorder()
		n := int(chunk) + 1
		writeAnswerFrom(got, slog.New(slog.DiscardHandler), outputOf(res),
			&chunkReader{b: stdout, n: n, dataEOF: dataEOF}, &chunkReader{b: stderr, n: n, dataEOF: dataEOF}, enc)
		if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
			t.Fatalf("stdout %q stderr %q encoding %q, reads of %d:\n got %d %q\nwant %d %q", stdout, stderr, enc, n, got.Code, got.Body, want.Code, want.Body)
		}
		// And whole, through dockerhost's own output.
		got = httptest.NewRecorder()
		writeAnswer(got, slog.New(slog.DiscardHandler), outputOf(res), enc)
		if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
			t.Fatalf("stdout %q stderr %q encoding %q, whole:\n got %q\nwant %q", stdout, stderr, enc, got.Body, want.Body)
		}
		// A reader that fails mid-output cuts the answer: what was written
		// is never a complete JSON value (a reader would take a cut
		// output for the whole).
		got = httptest.NewRecorder()
		writeAnswerFrom(got, slog.New(slog.DiscardHandler), outputOf(res),
			io.MultiReader(bytes.NewReader(stdout), iotest.ErrReader(io.ErrClosedPipe)), bytes.NewReader(stderr), enc)
		var a execAnswer
		if err := json.Unmarshal(got.Body.Bytes(), &a); err == nil {
			t.Fatalf("an answer whose stdout read failed decodes whole: %q", got.Body)
		}
	})
}
