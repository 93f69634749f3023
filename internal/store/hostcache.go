package store

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// Every subdomain preview request asks HostIDsFold which host its label
// names: a SQLite query that cost about 9 µs and 20 allocations, more than
// the rest of the preview's own handler. Host ids change only when a host
// enrolls for the first time or is deleted, both through this store, which
// forgets the label's answer at once; the TTL bounds how long a write by
// another process (a future replica sharing the database) goes unseen.
const (
	hostIDsTTL = time.Second
	// hostIDsStale bounds the age of an answer served while the database
	// cannot answer: a page whose host resolved a moment ago keeps loading
	// through a brief outage instead of answering 503.
	hostIDsStale = time.Minute
	// hostIDsMax bounds the labels held: anyone may send requests for
	// random preview subdomains, and each unknown label is an answer too
	// (cached, or every such request would query).
	hostIDsMax = 4096
)

// hostIDsCache holds HostIDsFold's answers by ASCII-lower-cased label.
type hostIDsCache struct {
	mu sync.Mutex
	m  map[string]hostIDsEntry // guarded by mu
	// gen counts forgets: an answer read from the database before one is
	// not stored after it (it may predate the write that caused it).
	gen uint64 // guarded by mu
}

type hostIDsEntry struct {
	ids []string
	at  time.Time
}

// get returns a copy of label's answer if it is younger than maxAge at now.
func (c *hostIDsCache) get(label string, now time.Time, maxAge time.Duration) ([]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[label]
	if !ok {
		return nil, false
	}
	if now.Sub(e.at) >= maxAge || now.Before(e.at) {
		if now.Sub(e.at) >= hostIDsStale {
			delete(c.m, label)
		}
		return nil, false
	}
	return slices.Clone(e.ids), true
}

// generation is what put must be given for an answer about to be read.
func (c *hostIDsCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put stores label's answer, read at now, unless a forget came since gen
// was taken. A full cache drops the answers too old to be served fresh,
// and starts over if that frees nothing.
func (c *hostIDsCache) put(label string, ids []string, gen uint64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if _, ok := c.m[label]; !ok && len(c.m) >= hostIDsMax {
		for k, e := range c.m {
			if now.Sub(e.at) >= hostIDsTTL || now.Before(e.at) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= hostIDsMax {
			c.m = nil
		}
	}
	if c.m == nil {
		c.m = make(map[string]hostIDsEntry)
	}
	c.m[label] = hostIDsEntry{ids: slices.Clone(ids), at: now}
}

// forget drops the answer for id's label: its host was just enrolled or
// deleted.
func (c *hostIDsCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, foldKey(id))
	c.gen++
}

// len is the number of labels held.
func (c *hostIDsCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// foldKey is id under SQLite's NOCASE, which folds ASCII letters only; an
// id already lower-case, as preview labels are, is returned as it is,
// without allocating.
func foldKey(id string) string {
	i := strings.IndexFunc(id, func(r rune) bool { return 'A' <= r && r <= 'Z' })
	if i < 0 {
		return id
	}
	b := []byte(id)
	for ; i < len(b); i++ {
		if 'A' <= b[i] && b[i] <= 'Z' {
			b[i] += 'a' - 'A'
		}
	}
	return string(b)
}
