package dockerhost

import (
	"context"
	"sync"
)

// rwLock is the execution mutex: execs share it, a checkpoint holds it
// alone. Waiting respects ctx, and a waiting checkpoint blocks new execs so
// a stream of commands cannot starve it.
type rwLock struct {
	mu       sync.Mutex
	readers  int
	writer   bool
	waitingW int
	changed  chan struct{} // closed and replaced on every release
}

func (l *rwLock) wait(ctx context.Context, try func() bool) error {
	for {
		l.mu.Lock()
		if try() {
			l.mu.Unlock()
			return nil
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (l *rwLock) RLock(ctx context.Context) error {
	return l.wait(ctx, func() bool {
		if l.writer || l.waitingW > 0 {
			return false
		}
		l.readers++
		return true
	})
}

func (l *rwLock) Lock(ctx context.Context) error {
	l.mu.Lock()
	l.waitingW++
	l.broadcast() // a change waiters (and tests, waitWriter) can see
	l.mu.Unlock()
	err := l.wait(ctx, func() bool {
		if l.writer || l.readers > 0 {
			return false
		}
		l.writer = true
		l.waitingW--
		return true
	})
	if err != nil {
		l.mu.Lock()
		l.waitingW--
		l.broadcast()
		l.mu.Unlock()
	}
	return err
}

func (l *rwLock) RUnlock() {
	l.mu.Lock()
	l.readers--
	l.broadcast()
	l.mu.Unlock()
}

func (l *rwLock) Unlock() {
	l.mu.Lock()
	l.writer = false
	l.broadcast()
	l.mu.Unlock()
}

// broadcast wakes every waiter; l.mu must be held.
func (l *rwLock) broadcast() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// taking reports whether a writer holds the lock, and how many readers
// hold it: a writer that does not hold it waits for them.
func (l *rwLock) taking() (writer bool, readers int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writer, l.readers
}

// waitWriter waits until a writer waits for or holds the lock, or ctx
// ends (tests order a checkpoint against a running exec with it).
func (l *rwLock) waitWriter(ctx context.Context) error {
	return l.wait(ctx, func() bool { return l.writer || l.waitingW > 0 })
}
