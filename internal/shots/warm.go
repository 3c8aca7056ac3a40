package shots

import (
	"context"
	"sync"
)

// Warm is a browser started ahead of a job's pictures, with its tabs open, so the job's time
// is not spent starting it: the pipeline warms one up while the site builds. Pass it in
// Request.Warm; Shoot takes it over. Close releases it when it was not used (a failed build);
// Close after Shoot, or twice, is harmless. Safe for concurrent use.
type Warm struct {
	ready chan struct{}
	b     *browser
	tabs  []*tab
	err   error

	mu     sync.Mutex
	closed bool
	taken  bool
}

// Warm starts a browser and s.cfg.Parallel tabs in the background. It returns nil when there
// is no browser to start. ctx bounds the start.
func (s *Shooter) Warm(ctx context.Context) *Warm {
	if s == nil || s.cfg.Browser == "" {
		return nil
	}
	w := &Warm{ready: make(chan struct{})}
	go func() {
		defer close(w.ready)
		w.b, w.err = s.l.start(ctx)
		for i := 0; w.err == nil && i < s.cfg.Parallel; i++ {
			t, err := w.b.newTab(ctx)
			if err == nil {
				err = t.warmUp(ctx)
			}
			if err != nil {
				break
			}
			w.tabs = append(w.tabs, t)
		}
		w.mu.Lock()
		closed := w.closed
		w.mu.Unlock()
		if closed && w.b != nil {
			w.b.close()
		}
	}()
	return w
}

// Wait waits until the browser is up (or failed to start).
func (w *Warm) Wait() {
	if w != nil {
		<-w.ready
	}
}

// take waits for the browser and hands it over (with its tabs); ok is false when it could
// not start, was closed or was taken already.
func (w *Warm) take(ctx context.Context) (*browser, []*tab, bool) {
	if w == nil {
		return nil, nil, false
	}
	select {
	case <-w.ready:
	case <-ctx.Done():
		return nil, nil, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.taken || w.err != nil {
		return nil, nil, false
	}
	w.taken = true
	return w.b, w.tabs, true
}

// Close ends the browser unless Shoot took it; it does not wait for it to exit.
func (w *Warm) Close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.taken {
		w.closed = true
		return
	}
	w.closed = true
	select {
	case <-w.ready:
		if w.b != nil {
			go w.b.close()
		}
	default: // the starter closes it when it is up
	}
}
