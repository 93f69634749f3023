package execapi

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"unicode/utf8"

	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/gateway"
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

// answer is res on the wire in encoding. The output limit was applied to
// the raw bytes already; base64 makes the answer a third larger.
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

// answerBuffer is what writeAnswer gathers before each write.
const answerBuffer = 32 << 10

// writeAnswer writes a as gateway.WriteJSON would, byte for byte, without
// ever holding its JSON whole. encoding/json builds an answer in memory
// before it writes a byte, and escapes each control character and each of
// <, > and & as six bytes: 63 MiB of NUL output (under the 64 MiB
// maxOutputBytes bound) took 2.6 GiB of allocations, 1.7 GiB of peak heap
// and 26 to 70 s of CPU to answer, so a few such commands at once could
// take the gateway down. Here stdout and stderr are escaped as they are
// written.
func writeAnswer(w http.ResponseWriter, a execAnswer) {
	stdout, stderr := a.Stdout, a.Stderr
	a.Stdout, a.Stderr = stdoutMark, stderrMark
	frame, err := json.Marshal(a)
	outMark, errMark := outMarkJSON, errMarkJSON
	i, j := bytes.Index(frame, outMark), bytes.Index(frame, errMark)
	if err != nil || i < 0 || j < i+len(outMark) {
		// Not reached: execAnswer marshals, with each mark once.
		a.Stdout, a.Stderr = stdout, stderr
		gateway.WriteJSON(w, http.StatusOK, a)
		return
	}
	gateway.WriteJSONHeader(w, http.StatusOK)
	bw := bufio.NewWriterSize(w, answerBuffer)
	bw.Write(frame[:i])
	writeJSONString(bw, stdout)
	bw.Write(frame[i+len(outMark) : j])
	writeJSONString(bw, stderr)
	bw.Write(frame[j+len(errMark):])
	bw.WriteByte('\n') // as json.Encoder ends each value
	_ = bw.Flush()
}

// writeJSONString writes s as json.Marshal does, quotes included:
// invalid UTF-8 as U+FFFD, control characters, <, > and & as \u00XX (\n,
// \r, \t, \b and \f as those), U+2028 and U+2029 escaped. It allocates
// nothing: json.Marshal of each piece would allocate as much as it writes.
func writeJSONString(w *bufio.Writer, s string) {
	const hex = "0123456789abcdef"
	w.WriteByte('"')
	start := 0 // s[start:i] is written as it is
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= ' ' && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			w.WriteString(s[start:i])
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
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			w.WriteString(s[start:i])
			w.WriteString(`\ufffd`)
		case r == '\u2028' || r == '\u2029':
			w.WriteString(s[start:i])
			w.WriteString(`\u202`)
			w.WriteByte(hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	w.WriteString(s[start:])
	w.WriteByte('"')
}
