package gateway

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzBodyError: a strict body's unknown field is named by walking the
// body again beside encoding/json, so the walk must agree with it. Where
// encoding/json decodes a body, the walk finds no unknown field; where it
// refuses one, the walk finds that field (its path ends in the key
// encoding/json named), and BodyError names it so.
func FuzzBodyError(f *testing.F) {
	for _, s := range []string{
		`{"nope":1}`,
		`{"inner":{"mode":"x","Skip":"y"}}`,
		`{"when":"2020-01-01T00:00:00Z","any":{"x":{"y":1}},"items":[{"mode":"a"},{"mod":"b"}]}`,
		`{"byKey":{"a":{"mode":"x"},"b.c":{"x":1}}}`,
		`{"COMMAND":"x","plain":1,"Inner":{"MODE":"x","m":1}}`,
		`{"inner":[{"x":1}],"items":{"a":1},"name":{"x":1},"\u212aey":1}`,
		`{"inner":null,"items":[null,{"mode":"a","mode":"b"}],"a\"b":1}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if len(body) > bodyTapMax {
			return
		}
		var v jfBody
		r, tap := TapBody(strings.NewReader(body), &v)
		dec := json.NewDecoder(r)
		dec.DisallowUnknownFields()
		err := dec.Decode(&v)
		path, accepted, found := unknownField([]byte(body), reflect.TypeOf(&v))
		if err == nil {
			if found {
				t.Fatalf("%q decodes, but the walk found an unknown field %q", body, path)
			}
			return
		}
		quoted, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
		msg := BodyError(err, tap, &v)
		if !ok {
			return
		}
		key, uerr := strconv.Unquote(quoted)
		if uerr != nil {
			t.Fatalf("encoding/json's %q: %v", err, uerr)
		}
		if !found {
			t.Fatalf("%q: encoding/json refuses field %q, the walk found none", body, key)
		}
		if path != key && !strings.HasSuffix(path, "."+key) {
			t.Fatalf("%q: encoding/json refuses field %q, the walk names %q", body, key, path)
		}
		if !strings.HasPrefix(msg, path+": unknown field; ") || !strings.HasSuffix(msg, " takes "+strings.Join(accepted, ", ")) {
			t.Fatalf("%q: BodyError says %q, the walk found %q taking %q", body, msg, path, accepted)
		}
	})
}
