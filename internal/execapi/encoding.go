package execapi

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"unicode/utf8"

	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/gateway/wire"
)

// Encodings of an exec's stdin, stdout and stderr on the wire (the
// request's "encoding"). A JSON string holds only UTF-8 text: encoding/json
// turns every other byte into U+FFFD, so `cat image.png` or `tar -c` came
// back corrupted with no sign. base64 (RFC 4648 §4, padded) carries any
// bytes.
const (
	encodingUTF8   = "utf-8" // the default: what the API always did
	encodingBase64 = "base64"
)

// execBody is the exec request on the wire: dockerhost's, plus the
// encoding of stdin and of the answer's output.
type execBody struct {
	dockerhost.ExecRequest
	Encoding string `json:"encoding,omitempty"`
}

// execAnswer is an exec's answer on the wire. Encoding repeats the
// request's, so an answer says how to read it; it is absent when the
// request named none, leaving that answer as it always was. In the
// default encoding StdoutLossy and StderrLossy say that the output was
// not valid UTF-8, so the string holds U+FFFD where bytes were (ask again
// with "encoding": "base64" to get them); they are absent when false.
type execAnswer struct {
	dockerhost.ExecResult
	Encoding    string `json:"encoding,omitempty"`
	StdoutLossy bool   `json:"stdoutLossy,omitempty"`
	StderrLossy bool   `json:"stderrLossy,omitempty"`
}

// decodeStdin validates b.Encoding and turns b's stdin into the raw bytes
// dockerhost feeds the command, or returns the *dockerhost.Error to answer.
func (b *execBody) decodeStdin() error {
	switch b.Encoding {
	case "", encodingUTF8:
		return nil
	case encodingBase64:
		raw, err := base64.StdEncoding.DecodeString(b.Stdin)
		if err != nil {
			return &dockerhost.Error{Code: dockerhost.CodeInvalidRequest, Field: "stdin",
				Message: "is not valid base64 (RFC 4648 standard alphabet, padded), as encoding \"base64\" requires: " + err.Error()}
		}
		b.Stdin = string(raw)
		return nil
	}
	return &dockerhost.Error{Code: dockerhost.CodeInvalidRequest, Field: "encoding",
		Message: "must be \"" + encodingUTF8 + "\" (the default) or \"" + encodingBase64 + "\""}
}

// Stand-ins for stdout and stderr while the rest of an answer is
// marshaled: NUL bytes, which no output's JSON string begins with
// unescaped, make them impossible to mistake for other content.
const (
	stdoutMark = "\x00hostgate:stdout\x00"
	stderrMark = "\x00hostgate:stderr\x00"
)

// The marks as they appear in the marshaled answer, escaped once here.
var outMarkJSON, errMarkJSON = jsonString(stdoutMark), jsonString(stderrMark)

func jsonString(s string) []byte {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a string always marshals
	}
	return b
}

// answerBuffer is what writeAnswer gathers before each write, and the
// size of its reads of the output.
const answerBuffer = 32 << 10

// writeAnswer writes out's answer in encoding as gateway.WriteJSON would
// write it whole, byte for byte, without ever holding it whole, nor the
// output: that stays where dockerhost keeps it (its output memory, or a
// spool file) and is read and escaped as it is written. encoding/json
// builds an answer in memory before it writes a byte, and escapes each
// control character and each of <, > and & as six bytes: 63 MiB of NUL
// output (under the 64 MiB maxOutputBytes bound) took 2.6 GiB of
// allocations, 1.7 GiB of peak heap and 26 to 70 s of CPU to answer.
func writeAnswer(w http.ResponseWriter, log *slog.Logger, out *dockerhost.ExecOutput, encoding string) {
	writeAnswerFrom(w, log, out, out.Stdout.Reader(), out.Stderr.Reader(), encoding)
}

// writeAnswerFrom is writeAnswer with out's stdout and stderr read from
// the readers given.
func writeAnswerFrom(w http.ResponseWriter, log *slog.Logger, out *dockerhost.ExecOutput, stdout, stderr io.Reader, encoding string) {
	a := execAnswer{
		ExecResult: dockerhost.ExecResult{ExitCode: out.ExitCode, Stdout: stdoutMark, Stderr: stderrMark, DurationMs: out.DurationMs, OOMKilled: out.OOMKilled},
		Encoding:   encoding,
	}
	writeOutputs(w, log, http.StatusOK, func(outLossy, errLossy bool) any {
		a.StdoutLossy, a.StderrLossy = outLossy, errLossy
		return a
	}, stdout, stderr, encoding)
}

// writeErrorOutput answers status with the error body e and out, the
// output its command printed before it was cut (wire.ExecCutError),
// streamed as writeAnswer streams a result's. From dockerhost it is at
// most maxOutputBytes in all (for output_limit, the bytes up to that
// limit; the rest was never read), as an answer's.
func writeErrorOutput(w http.ResponseWriter, log *slog.Logger, status int, e wire.Error, out *dockerhost.ExecOutput, encoding string) {
	a := wire.ExecCutErrorBody{Error: wire.ExecCutError{Error: e, Stdout: stdoutMark, Stderr: stderrMark, Encoding: encoding}}
	writeOutputs(w, log, status, func(outLossy, errLossy bool) any {
		a.Error.StdoutLossy, a.Error.StderrLossy = outLossy, errLossy
		return a
	}, out.Stdout.Reader(), out.Stderr.Reader(), encoding)
}

// writeOutputs answers status with the JSON of frame, whose stdout and
// stderr are the marks, with the readers' bytes in their place, streamed
// in encoding; frame is called again with the lossy flags once both are
// written, for the tail after stderr (where the flags are).
func writeOutputs(w http.ResponseWriter, log *slog.Logger, status int, frame func(outLossy, errLossy bool) any, stdout, stderr io.Reader, encoding string) {
	head, err := json.Marshal(frame(false, false))
	if err != nil {
		panic(err) // not reached: the answers always marshal
	}
	i, j := bytes.Index(head, outMarkJSON), bytes.Index(head, errMarkJSON)
	gateway.WriteJSONHeader(w, status)
	cw := &callerWriter{w: w}
	bw := bufio.NewWriterSize(cw, answerBuffer)
	buf := make([]byte, answerBuffer)
	write := writeJSONStream
	if encoding == encodingBase64 {
		write = writeBase64Stream
	}
	var outLossy, errLossy bool
	bw.Write(head[:i])
	if outLossy, err = write(bw, stdout, buf); err == nil {
		bw.Write(head[i+len(outMarkJSON) : j])
		errLossy, err = write(bw, stderr, buf)
	}
	if err != nil && cw.err != nil {
		// The caller hung up or stopped reading (base64's copy fails
		// with the write): its doing, and nobody is left to tell.
		log.Debug("exec answer cut: its caller stopped reading it", "err", cw.err)
		return
	}
	if err != nil {
		// The status is sent: a cut answer is all that is left to say
		// it, as a JSON reader fails on it.
		log.Error("exec answer cut: reading the command's output failed", "err", err)
		_ = bw.Flush()
		return
	}
	// The flags follow stderr, so the frame's tail is marshaled last.
	tail, _ := json.Marshal(frame(outLossy, errLossy))
	j = bytes.Index(tail, errMarkJSON)
	bw.Write(tail[j+len(errMarkJSON):])
	bw.WriteByte('\n') // as json.Encoder ends each value
	_ = bw.Flush()
}

// callerWriter is an answer's writer, keeping the first failure of a
// write to the caller, so that a cut answer tells the caller's hang-up
// from an output that could not be read.
type callerWriter struct {
	w   io.Writer
	err error
}

func (c *callerWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	if err != nil {
		c.err = err
	}
	return n, err
}

// writeBase64Stream writes r's bytes as a JSON string in base64 (whose
// alphabet JSON escapes nothing of); base64 is never lossy.
func writeBase64Stream(w *bufio.Writer, r io.Reader, buf []byte) (bool, error) {
	w.WriteByte('"')
	enc := base64.NewEncoder(base64.StdEncoding, w)
	if _, err := io.CopyBuffer(enc, struct{ io.Reader }{r}, buf); err != nil {
		return false, err
	}
	_ = enc.Close()
	w.WriteByte('"')
	return false, nil
}

// writeJSONStream writes r's bytes as json.Marshal writes them as a
// string, quotes included, and reports whether they were not valid UTF-8
// (so that U+FFFD stands for some). A rune cut by a read waits for the
// next in buf.
func writeJSONStream(w *bufio.Writer, r io.Reader, buf []byte) (lossy bool, err error) {
	w.WriteByte('"')
	held := 0
	for {
		n, rerr := r.Read(buf[held:])
		n += held
		done, bad := writeJSONString(w, buf[:n], rerr != nil)
		lossy = lossy || bad
		held = copy(buf, buf[done:n])
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return lossy, rerr
		}
	}
	w.WriteByte('"')
	return lossy, nil
}

// writeJSONString writes s as json.Marshal does, without the quotes:
// invalid UTF-8 as U+FFFD (reported as lossy), control characters, <, >
// and & as \u00XX (\n, \r, \t, \b and \f as those), U+2028 and U+2029
// escaped. Unless final, it stops before a rune s cuts short, returning
// how much of s it wrote. It allocates nothing: json.Marshal of each
// piece would allocate as much as it writes.
func writeJSONString(w *bufio.Writer, s []byte, final bool) (written int, lossy bool) {
	const hex = "0123456789abcdef"
	start := 0 // s[start:i] is written as it is
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= ' ' && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			w.Write(s[start:i])
			switch b {
			case '"', '\\':
				w.WriteByte('\\')
				w.WriteByte(b)
			case '\n':
				w.WriteString(`\n`)
			case '\r':
				w.WriteString(`\r`)
			case '\t':
				w.WriteString(`\t`)
			case '\b':
				w.WriteString(`\b`)
			case '\f':
				w.WriteString(`\f`)
			default:
				w.WriteString(`\u00`)
				w.WriteByte(hex[b>>4])
				w.WriteByte(hex[b&0xf])
			}
			i++
			start = i
			continue
		}
		if !final && !utf8.FullRune(s[i:]) {
			w.Write(s[start:i])
			return i, lossy
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			w.Write(s[start:i])
			w.WriteString(`\ufffd`)
			lossy = true
		case r == '\u2028' || r == '\u2029':
			w.Write(s[start:i])
			w.WriteString(`\u202`)
			w.WriteByte(hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	w.Write(s[start:])
	return len(s), lossy
}
