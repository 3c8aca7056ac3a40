package agent

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

const (
	// tailBytes is how much of the end of the output a Result keeps.
	tailBytes = 4 << 10
	// maxLine bounds one line; the rest of a longer line is dropped (and it is not parsed).
	maxLine = 16 << 20
)

// sink receives a run's stdout and stderr: it keeps the tail, feeds stdout lines to the
// parser, copies every line to the live view, and records when output last arrived. Safe for
// the two concurrent writers.
type sink struct {
	mu      sync.Mutex
	tail    []byte
	live    io.Writer
	parser  parser
	streams []*lineWriter
	events  int          // stdout lines that look like an event (a JSON object)
	last    atomic.Int64 // unix nanoseconds of the last output
}

func newSink(p parser, live io.Writer) *sink {
	s := &sink{parser: p, live: live}
	s.touch()
	return s
}

// writer returns a writer for one stream; parse says whether its lines go to the parser.
func (s *sink) writer(parse bool) io.Writer {
	w := &lineWriter{sink: s, parse: parse}
	s.streams = append(s.streams, w)
	return w
}

func (s *sink) touch() { s.last.Store(time.Now().UnixNano()) }

// idle is how long ago output last arrived.
func (s *sink) idle() time.Duration {
	return time.Since(time.Unix(0, s.last.Load()))
}

// finish hands over unterminated last lines. Call once the process is gone.
func (s *sink) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.streams {
		w.flush()
	}
}

// tailString is the kept tail, starting at a character boundary.
func (s *sink) tailString() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tail
	for len(t) > 0 && !utf8.RuneStart(t[0]) {
		t = t[1:]
	}
	return string(t)
}

func (s *sink) keepTail(p []byte) {
	if len(p) >= tailBytes {
		s.tail = append(s.tail[:0], p[len(p)-tailBytes:]...)
		return
	}
	s.tail = append(s.tail, p...)
	if over := len(s.tail) - tailBytes; over > 0 {
		s.tail = append(s.tail[:0], s.tail[over:]...)
	}
}

// emit hands one complete line to the live view and, for stdout, to the parser.
func (s *sink) emit(line []byte, parse, truncated bool) {
	if s.live != nil {
		_, _ = s.live.Write(append(line, '\n'))
	}
	if parse && !truncated {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '{' {
			s.events++
		}
		s.parser.line(line)
	}
}

// lineWriter splits one stream into lines.
type lineWriter struct {
	sink      *sink
	parse     bool
	buf       []byte
	truncated bool
}

func (w *lineWriter) Write(p []byte) (int, error) {
	s := w.sink
	s.touch()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keepTail(p)
	n := len(p)
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.add(p)
			return n, nil
		}
		w.add(p[:i])
		w.flush()
		p = p[i+1:]
	}
}

func (w *lineWriter) add(p []byte) {
	if room := maxLine - len(w.buf); len(p) > room {
		p, w.truncated = p[:room], true
	}
	w.buf = append(w.buf, p...)
}

// flush emits the buffered line, if any. The caller holds the sink's lock.
func (w *lineWriter) flush() {
	if len(w.buf) > 0 || w.truncated {
		w.sink.emit(w.buf, w.parse, w.truncated)
	}
	w.buf, w.truncated = w.buf[:0], false
}
