package dashboard

import (
	"context"
	"maps"
	"sync"
	"time"
)

// feed polls one snapshot of rendered sections for every watcher at once: it runs while
// someone watches and stops by itself after the last one leaves. Safe for concurrent use.
type feed struct {
	every time.Duration
	read  func(ctx context.Context) map[string]string

	mu       sync.Mutex
	watchers map[chan struct{}]struct{}
	running  bool
	cur      map[string]string
}

// readTimeout bounds one snapshot read.
const readTimeout = 10 * time.Second

func newFeed(every time.Duration, read func(ctx context.Context) map[string]string) *feed {
	return &feed{every: every, read: read, watchers: map[chan struct{}]struct{}{}}
}

// join adds a watcher. notify receives a value whenever the snapshot changed since the
// watcher last looked (coalesced: it never blocks the feed); snapshot returns the current
// sections; leave must be called once done.
func (f *feed) join() (notify <-chan struct{}, snapshot func() map[string]string, leave func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watchers[ch] = struct{}{}
	if f.cur != nil {
		ch <- struct{}{}
	}
	if !f.running {
		f.running = true
		go f.loop()
	}
	return ch, f.snapshot, func() {
		f.mu.Lock()
		delete(f.watchers, ch)
		f.mu.Unlock()
	}
}

func (f *feed) snapshot() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}

// loop reads a snapshot every period until no one watches.
func (f *feed) loop() {
	t := time.NewTicker(f.every)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		next := f.read(ctx)
		cancel()
		if !f.publish(next) {
			return
		}
		<-t.C
	}
}

// publish stores next and notifies the watchers when it differs. It reports false, and
// marks the feed stopped, when no one watches any more.
func (f *feed) publish(next map[string]string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.watchers) == 0 {
		f.running, f.cur = false, nil
		return false
	}
	if f.cur != nil && maps.Equal(f.cur, next) {
		return true
	}
	f.cur = next
	for ch := range f.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return true
}
