package execapi

import (
	"encoding/base64"
	"unicode/utf8"

	"github.com/hostgate/hostgate/dockerhost"
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
