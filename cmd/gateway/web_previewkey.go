package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hostgate/hostgate/internal/durable"
	"github.com/hostgate/hostgate/internal/previewauth"
)

// previewKeyFile, in the state dir, holds the key that signs subdomain
// previews' cookies.
const previewKeyFile = "preview_key"

// previewSigner mints and checks the previews' login tickets and cookies,
// the cookies with the key kept in dir, made on the first start. With a
// key of each process's own, a gateway restart logged every preview out,
// and what a page sends by itself cannot log in again: a Vite tab's hot
// reload polled its dev server with refused sockets for good, its page
// never updated again, until a person reloaded. A key that cannot be kept
// leaves that, with a warning.
func previewSigner(dir string, log *slog.Logger) *previewauth.Signer {
	if dir == "" {
		return previewauth.New(nil)
	}
	path := filepath.Join(dir, previewKeyFile)
	key, err := loadOrCreatePreviewKey(path)
	if err == nil {
		var s *previewauth.Signer
		if s, err = previewauth.NewKeyed(key, nil); err == nil {
			return s
		}
	}
	log.Warn("preview cookies end when this gateway stops: their key could not be kept in the state dir, so a restart logs every open preview out", "file", path, "err", err)
	return previewauth.New(nil)
}

// loadOrCreatePreviewKey reads the key at path, or makes one there (0600)
// when there is none.
func loadOrCreatePreviewKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err == nil {
		if len(key) != previewauth.KeySize {
			return nil, fmt.Errorf("%s holds %d bytes, not a key of %d: delete it, and the next start makes a new one (open previews log in again)", path, len(key), previewauth.KeySize)
		}
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	key = make([]byte, previewauth.KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+previewKeyFile+"-*")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return nil, err
	}
	if _, err := tmp.Write(key); err != nil {
		_ = tmp.Close()
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	// A link fails where a key is already: a key another process made in
	// between is kept, and read. Its directory synced too, or a power
	// loss can lose the new name, and a restart every open preview.
	if err := durable.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return loadOrCreatePreviewKey(path)
		}
		return nil, err
	}
	return key, nil
}
