package gateway

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// bodyTapMax is how much of a body a BodyTap keeps: every body but an
// exec's (whose stdin may run to megabytes) is smaller.
const bodyTapMax = 64 << 10

// BodyTap reads a body and keeps what it read, up to 64 KiB, so that its
// decoding error can name an unknown field by its whole path
// (BodyError).
type BodyTap struct {
	r    io.Reader
	kept []byte
	over bool
}

// TapBody returns the reader to decode a body r into v from, and the tap
// for BodyError: nil where v has no object inside it, whose unknown
// fields can only be its own (so an exec's body, whose stdin may run to
// megabytes, is not copied).
func TapBody(r io.Reader, v any) (io.Reader, *BodyTap) {
	if !nestedObjects(reflect.TypeOf(v)) {
		return r, nil
	}
	t := &BodyTap{r: r}
	return t, t
}

func (t *BodyTap) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if !t.over {
		if len(t.kept)+n > bodyTapMax {
			t.over, t.kept = true, nil
		} else {
			t.kept = append(t.kept, p[:n]...)
		}
	}
	return n, err
}

// BodyError is JSONBodyError for err, the error of decoding a body into v
// (through tap, from TapBody) with unknown fields disallowed: an unknown
// field is named by its path in the body ("resources.cpu", not "cpu",
// which encoding/json's error says) with the fields its object takes.
func BodyError(err error, tap *BodyTap, v any) string {
	if errors.Is(err, io.EOF) {
		// No JSON value at all: a POST sent without its body (curl -X
		// POST without -d) read "body: not valid JSON: EOF".
		msg := "body: empty: send a JSON object"
		if t := deref(reflect.TypeOf(v)); t != nil && t.Kind() == reflect.Struct {
			if names := fieldNames(jsonFields(t)); len(names) > 0 {
				msg += "; the body takes " + strings.Join(names, ", ")
			}
		}
		return msg
	}
	name, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return JSONBodyError(err)
	}
	name = strings.Trim(name, `"`)
	t := reflect.TypeOf(v)
	var (
		path     string
		accepted []string
		found    bool
	)
	if tap != nil && !tap.over {
		path, accepted, found = unknownField(tap.kept, t)
	}
	if !found {
		// A body too large to keep: when v has no object inside it, the
		// field is one of the body's own.
		if nestedObjects(t) {
			return name + ": unknown field"
		}
		path, accepted = name, fieldNames(jsonFields(deref(t)))
	}
	owner := "the body"
	if i := strings.LastIndex(path, "."); i >= 0 {
		owner = path[:i]
	}
	return fmt.Sprintf("%s: unknown field; %s takes %s", path, owner, strings.Join(accepted, ", "))
}

// jsonField is a field encoding/json fills: its name in JSON and its type.
type jsonField struct {
	name string
	typ  reflect.Type
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// custom reports whether t decodes itself, so its keys are its own to judge.
func custom(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshaler) || p.Implements(jsonUnmarshaler) || t.Implements(textUnmarshaler) || p.Implements(textUnmarshaler)
}

// jsonFields is struct type t's fields as encoding/json names them, in
// declaration order, those of untagged embedded structs in their place.
func jsonFields(t reflect.Type) []jsonField {
	var fs []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			if et := deref(f.Type); et.Kind() == reflect.Struct {
				fs = append(fs, jsonFields(et)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fs = append(fs, jsonField{name, f.Type})
	}
	return fs
}

func fieldNames(fs []jsonField) []string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	return names
}

// lookup finds key among fs as encoding/json does: exactly, or else
// without regard to case.
func lookup(fs []jsonField, key string) (reflect.Type, bool) {
	for _, f := range fs {
		if f.name == key {
			return f.typ, true
		}
	}
	for _, f := range fs {
		if strings.EqualFold(f.name, key) {
			return f.typ, true
		}
	}
	return nil, false
}

// nestedObjects reports whether a value of type t holds a struct below
// its top level.
func nestedObjects(t reflect.Type) bool {
	t = deref(t)
	if t.Kind() != reflect.Struct {
		return true
	}
	var holds func(reflect.Type, int) bool
	holds = func(t reflect.Type, depth int) bool {
		t = deref(t)
		switch t.Kind() {
		case reflect.Struct:
			return depth > 0 || slices.ContainsFunc(jsonFields(t), func(f jsonField) bool { return holds(f.typ, depth+1) })
		case reflect.Map, reflect.Slice, reflect.Array:
			return holds(t.Elem(), depth+1)
		case reflect.Interface:
			return true
		}
		return false
	}
	return holds(t, 0)
}

// unknownField walks body, one JSON value, as encoding/json would decode
// it into a value of type t, to the first object key t has no field for:
// its path ("resources.cpu", "items[2].x") and the fields its object
// takes. ok is false when there is none or body is not valid JSON.
func unknownField(body []byte, t reflect.Type) (path string, accepted []string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	path, accepted, err := walkJSON(dec, t, "")
	return path, accepted, err == nil && accepted != nil
}

// walkJSON reads one value from dec against type t at path. It returns a
// non-nil accepted at the first unknown key.
func walkJSON(dec *json.Decoder, t reflect.Type, path string) (string, []string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return "", nil, nil // a scalar
	}
	t = deref(t)
	if t == nil || custom(t) {
		return "", nil, skipJSON(dec)
	}
	switch {
	case d == '{' && (t.Kind() == reflect.Struct || t.Kind() == reflect.Map):
		var fs []jsonField
		if t.Kind() == reflect.Struct {
			fs = jsonFields(t)
		}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return "", nil, err
			}
			key, _ := kt.(string)
			sub := key
			if path != "" {
				sub = path + "." + key
			}
			vt := t
			if t.Kind() == reflect.Map {
				vt = t.Elem()
			} else if vt, ok = lookup(fs, key); !ok {
				return sub, fieldNames(fs), nil
			}
			if p, acc, err := walkJSON(dec, vt, sub); err != nil || acc != nil {
				return p, acc, err
			}
		}
	case d == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i := 0; dec.More(); i++ {
			if p, acc, err := walkJSON(dec, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil || acc != nil {
				return p, acc, err
			}
		}
	default:
		return "", nil, skipJSON(dec)
	}
	_, err = dec.Token() // the closing delimiter
	return "", nil, err
}

// skipJSON reads the rest of an object or array whose opening delimiter
// was read.
func skipJSON(dec *json.Decoder) error {
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}
