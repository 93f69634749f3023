// Copyright 2026 The hostgate Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build !amd64 || !gc || purego

package ssh

import "crypto/cipher"

// newChaChaSealer is nil where x/crypto has no assembly for the AEAD
// (change 21; on arm64 it has some for chacha20 alone, which the packet
// cipher then uses).
func newChaChaSealer([]byte) cipher.AEAD { return nil }
