// Package live carries a running job's output to whoever watches it (the dashboard): the
// pipeline writes the agent's and the build's output lines into a Hub, keyed by job, and
// watchers get the recent backlog plus every new line. In-process only: a job run by a worker
// in another process shows its output there.
package live

import (
	"bytes"
	"io"
	"sync"
)

// Hub keeps the last lines of each job's output and fans new lines out. Safe for concurrent use.
type Hub struct {
	mu   sync.Mutex
	keep int
	jobs map[string]*stream
	// order remembers jobs by first write, to forget the oldest beyond maxJobs.
	order []string
}

const maxJobs = 200

type stream struct {
	lines    []string
	partial  []byte
	watchers map[chan string]struct{}
}

// NewHub keeps up to keep lines per job (default 500).
func NewHub(keep int) *Hub {
	if keep <= 0 {
		keep = 500
	}
	return &Hub{keep: keep, jobs: map[string]*stream{}}
}

// Writer returns an io.Writer whose complete lines are published for jobID.
func (h *Hub) Writer(jobID string) io.Writer { return writer{h: h, job: jobID} }

type writer struct {
	h   *Hub
	job string
}

func (w writer) Write(p []byte) (int, error) {
	w.h.write(w.job, p)
	return len(p), nil
}

func (h *Hub) write(job string, p []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.streamLocked(job)
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			return
		}
		h.publishLocked(s, string(s.partial[:i]))
		s.partial = s.partial[i+1:]
	}
}

func (h *Hub) streamLocked(job string) *stream {
	s := h.jobs[job]
	if s == nil {
		s = &stream{watchers: map[chan string]struct{}{}}
		h.jobs[job] = s
		h.order = append(h.order, job)
		if len(h.order) > maxJobs {
			delete(h.jobs, h.order[0])
			h.order = h.order[1:]
		}
	}
	return s
}

func (h *Hub) publishLocked(s *stream, line string) {
	s.lines = append(s.lines, line)
	if over := len(s.lines) - h.keep; over > 0 {
		s.lines = s.lines[over:]
	}
	for ch := range s.watchers {
		select {
		case ch <- line:
		default: // a slow watcher misses lines rather than stalling the job
		}
	}
}

// Watch returns jobID's backlog and a channel of new lines until stop is called.
func (h *Hub) Watch(jobID string) (backlog []string, lines <-chan string, stop func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.streamLocked(jobID)
	ch := make(chan string, 256)
	s.watchers[ch] = struct{}{}
	backlog = append([]string(nil), s.lines...)
	return backlog, ch, func() {
		h.mu.Lock()
		delete(s.watchers, ch)
		h.mu.Unlock()
	}
}

// Lines returns the kept lines of jobID.
func (h *Hub) Lines(jobID string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.jobs[jobID]; s != nil {
		return append([]string(nil), s.lines...)
	}
	return nil
}
