package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

type jfInner struct {
	Mode string `json:"mode"`
	Skip string `json:"-"`
}

type jfBase struct {
	Command string `json:"command"`
}

type jfBody struct {
	jfBase
	Name  string             `json:"name"`
	Inner jfInner            `json:"inner"`
	Items []jfInner          `json:"items"`
	ByKey map[string]jfInner `json:"byKey"`
	When  time.Time          `json:"when"` // decodes itself
	Any   any                `json:"any"`
	Plain int
}

// BodyError names an unknown field by its path, through objects, arrays
// and maps, with the fields its object takes (an embedded struct's in
// its place, "-" fields left out); a type that decodes itself and an
// interface are not looked into.
func TestBodyErrorPaths(t *testing.T) {
	top := "command, name, inner, items, byKey, when, any, Plain"
	for _, c := range []struct{ body, want string }{
		{`{"nope":1}`, "nope: unknown field; the body takes " + top},
		{`{"inner":{"mode":"x","Skip":"y"}}`, "inner.Skip: unknown field; inner takes mode"},
		{`{"when":"2020-01-01T00:00:00Z","any":{"x":{"y":1}},"items":[{"mode":"a"},{"mod":"b"}]}`, "items[1].mod: unknown field; items[1] takes mode"},
		{`{"byKey":{"a":{"mode":"x"},"b.c":{"x":1}}}`, "byKey.b.c.x: unknown field; byKey.b.c takes mode"},
		{`{"COMMAND":"x","plain":1,"Inner":{"MODE":"x","m":1}}`, "Inner.m: unknown field; Inner takes mode"},
	} {
		var v jfBody
		r, tap := TapBody(strings.NewReader(c.body), &v)
		dec := json.NewDecoder(r)
		dec.DisallowUnknownFields()
		err := dec.Decode(&v)
		if err == nil {
			t.Errorf("%s: decoded", c.body)
			continue
		}
		if got := BodyError(err, tap, &v); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.body, got, c.want)
		}
	}
	// A body too large to keep names the field alone where it could be in
	// an inner object, and as the body's own where it cannot.
	big := `{"name":"` + strings.Repeat("a", bodyTapMax) + `","inner":{"x":1}}`
	var v jfBody
	r, tap := TapBody(strings.NewReader(big), &v)
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if got := BodyError(dec.Decode(&v), tap, &v); got != "x: unknown field" {
		t.Errorf("a large body: %q", got)
	}
	var flat struct {
		A string            `json:"a"`
		E map[string]string `json:"e"`
	}
	r, tap = TapBody(strings.NewReader(`{"a":"`+strings.Repeat("a", bodyTapMax)+`","b":1}`), &flat)
	if tap != nil {
		t.Error("a body without inner objects is kept")
	}
	dec = json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if got := BodyError(dec.Decode(&flat), tap, &flat); got != "b: unknown field; the body takes a, e" {
		t.Errorf("a large flat body: %q", got)
	}
}
