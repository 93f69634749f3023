package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// KeyCheck watches a JSON body go by on its way to a decoder and notes
// the first object key that appears twice in one object.
//
// encoding/json keeps the last of duplicate keys, silently: a body with
// "timeoutMs":5000,"timeoutMs":1 runs the command with 1 ms (and so
// destroys the execution), while a proxy or audit tool that reads the
// first sees 5000. A body that says two things is refused instead. Keys
// of a struct are compared as encoding/json matches them, in any case
// ("timeoutMs" and "TIMEOUTMS" fill one field); those of a map exactly
// (env's "PATH" and "path" are two variables).
// It keeps only the keys (and the path to them), never the values, so
// an exec's megabytes of stdin are not copied.
type KeyCheck struct {
	r     io.Reader
	typ   reflect.Type
	stack []*keyFrame
	inStr bool
	isKey bool
	esc   bool
	key   []byte // the key being read, quoted and escaped as sent
	dup   string // the first duplicate's path ("" for the key "")
	found bool
	// null is the path of the first null that stands as an element of an
	// array or a value of a map of strings, numbers or booleans:
	// encoding/json makes it the zero value without a word, so an exec's
	// "args": ["-c", null] (JSON.stringify's for an undefined element)
	// ran sh -c "" and "env": {"A": null} set A to "". A null field
	// stays what it is, a field left out.
	null     string
	nullSeen bool
	nullKind reflect.Kind
}

type keyFrame struct {
	typ       reflect.Type // what the value decodes into; nil: unknown
	fields    []jsonField  // typ's, when a struct
	next      reflect.Type // the type of the value after the last key
	object    bool
	expectKey bool
	keys      map[string]bool
	// last is the last key read in this object, the key alone: the path
	// to it is built from the stack's keys only for a duplicate. Each
	// frame kept its whole path, and a 57 KB body of nested objects
	// ({"abc":{"abc":…) held 137 MB of them at once, in every request
	// with a body.
	last string
}

// CheckKeys returns the reader to decode a body r into v from and the
// check to ask, once the body is read, whether a key came twice.
func CheckKeys(r io.Reader, v any) (io.Reader, *KeyCheck) {
	k := &KeyCheck{r: r, typ: reflect.TypeOf(v)}
	return k, k
}

func (k *KeyCheck) Read(p []byte) (int, error) {
	n, err := k.r.Read(p)
	if !k.found {
		k.scan(p[:n])
	}
	return n, err
}

// Err names the first duplicate key by its path, or is nil.
func (k *KeyCheck) Err() error {
	if !k.found && k.nullSeen {
		return fmt.Errorf("%s: null where a %s is wanted; send the value, or leave the element out", k.null, nullWant(k.nullKind))
	}
	if !k.found {
		return nil
	}
	name := k.dup
	if name == "" {
		name = `""`
	}
	return fmt.Errorf("%s: appears twice in its object; send each key once", name)
}

func (k *KeyCheck) top() *keyFrame {
	if len(k.stack) == 0 {
		return nil
	}
	return k.stack[len(k.stack)-1]
}

// scan follows the body's structure far enough to tell keys from values.
// The decoder checks the syntax; a malformed body fails there, so scan
// need not.
func (k *KeyCheck) scan(b []byte) {
	for i := 0; i < len(b); i++ {
		if k.inStr && !k.isKey && !k.esc {
			// The run of a value string, most of a body.
			for i < len(b) && b[i] != '"' && b[i] != '\\' {
				i++
			}
			if i == len(b) {
				return
			}
		}
		c := b[i]
		if k.inStr {
			if k.isKey {
				k.key = append(k.key, c)
			}
			switch {
			case k.esc:
				k.esc = false
			case c == '\\':
				k.esc = true
			case c == '"':
				k.inStr = false
				if k.isKey {
					k.endKey()
				}
			}
			continue
		}
		t := k.top()
		switch c {
		case '{', '[':
			f := &keyFrame{object: c == '{', expectKey: c == '{', typ: k.typ}
			if t != nil {
				f.typ = t.next
			}
			f.typ = deref(f.typ)
			if f.typ != nil && custom(f.typ) {
				f.typ = nil
			}
			if f.typ != nil {
				switch f.typ.Kind() {
				case reflect.Struct:
					f.fields = jsonFields(f.typ)
				case reflect.Map, reflect.Slice, reflect.Array:
					f.next = f.typ.Elem()
				}
			}
			k.stack = append(k.stack, f)
		case '}', ']':
			if t != nil {
				k.stack = k.stack[:len(k.stack)-1]
			}
		case ',':
			if t != nil && t.object {
				t.expectKey = true
			}
		case ':':
			if t != nil && t.object {
				t.expectKey = false
			}
		case 'n': // null: no other token outside a string holds an n
			if !k.nullSeen && t != nil && !(t.object && t.expectKey) && t.typ != nil && scalar(t.next) {
				switch t.typ.Kind() {
				case reflect.Slice, reflect.Array, reflect.Map:
					k.null, k.nullSeen, k.nullKind = strings.ToValidUTF8(k.path(), "\uFFFD"), true, t.next.Kind()
				}
			}
		case '"':
			k.inStr = true
			k.isKey = t != nil && t.object && t.expectKey
			if k.isKey {
				k.key = append(k.key[:0], c)
			}
		}
		if k.found {
			return
		}
	}
}

func (k *KeyCheck) endKey() {
	t := k.top()
	var key string
	if json.Unmarshal(k.key, &key) != nil {
		key = string(k.key) // the decoder will refuse it
	}
	t.last = key
	same := key
	if t.fields != nil {
		t.next = nil
		if f, ok := lookupField(t.fields, key); ok {
			same, t.next = f.name, f.typ
		}
	}
	if t.keys == nil {
		t.keys = make(map[string]bool)
	}
	if t.keys[same] {
		k.dup, k.found = strings.ToValidUTF8(k.path(), "\uFFFD"), true
	}
	t.keys[same] = true
}

// path is the path in the body of the key the top frame read last: the
// last keys of the objects around it, outermost first, joined by dots
// (arrays add nothing).
func (k *KeyCheck) path() string {
	path := ""
	for _, f := range k.stack {
		if !f.object {
			continue
		}
		if path == "" {
			path = f.last
		} else {
			path += "." + f.last
		}
	}
	return path
}

// lookupField is lookup's field.
func lookupField(fs []jsonField, key string) (jsonField, bool) {
	for _, f := range fs {
		if f.name == key {
			return f, true
		}
	}
	for _, f := range fs {
		if strings.EqualFold(f.name, key) {
			return f, true
		}
	}
	return jsonField{}, false
}

// scalar reports whether t is a string, number or boolean type, for
// which encoding/json takes null as its zero value.
func scalar(t reflect.Type) bool {
	if t == nil || custom(t) {
		return false
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// nullWant names what a null of kind stands where.
func nullWant(kind reflect.Kind) string {
	switch kind {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	}
	return "number"
}
