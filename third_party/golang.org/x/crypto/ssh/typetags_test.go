// Copyright 2026 The hostgate Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"bytes"
	"reflect"
	"testing"
)

// hostgate: HOSTGATE.md, change 6.

// TestHostgateTypeTags: the cached tags are what parsing the tag gives,
// for one-type and several-type messages, and Marshal and Unmarshal still
// agree.
func TestHostgateTypeTags(t *testing.T) {
	for _, m := range []interface{}{channelOpenMsg{}, windowAdjustMsg{}, channelEOFMsg{}, kexInitMsg{}, userAuthRequestMsg{}, channelRequestSuccessMsg{}} {
		typ := reflect.TypeOf(m)
		want := parseTypeTags(typ)
		if first, again := typeTags(typ), typeTags(typ); len(want) == 0 || !bytes.Equal(first, want) || !bytes.Equal(again, want) {
			t.Fatalf("%T: tags %v then %v, want %v", m, first, again, want)
		}
	}
	in := windowAdjustMsg{PeersID: 7, AdditionalBytes: 1 << 20}
	var out windowAdjustMsg
	if err := Unmarshal(Marshal(in), &out); err != nil || out != in {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	if err := Unmarshal(Marshal(channelEOFMsg{PeersID: 1}), &out); err == nil {
		t.Fatal("an EOF unmarshalled as a window adjust")
	}
}

// BenchmarkHostgateMarshalEOF: a channel EOF marshalled with the cached
// tags against parsing them each time, as upstream does.
func BenchmarkHostgateMarshalEOF(b *testing.B) {
	m := channelEOFMsg{PeersID: 7}
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			_ = Marshal(m)
		}
	})
	b.Run("parsed", func(b *testing.B) {
		for b.Loop() {
			_ = parseTypeTags(reflect.TypeOf(m))
			_ = Marshal(m)
		}
	})
}
