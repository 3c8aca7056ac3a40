package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

// pingEvery keeps idle event streams alive through proxies and notices closed connections.
const pingEvery = 15 * time.Second

// stream writes Server-Sent Events.
type stream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startStream answers r with an event stream; the server's write timeout does not apply.
func startStream(w http.ResponseWriter) (*stream, error) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, rc: rc}
	return s, s.comment("open")
}

// send writes one event whose data is v as JSON (one line: JSON escapes newlines).
func (s *stream) send(event string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *stream) comment(text string) error {
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	return s.rc.Flush()
}

// swap is the "swap" event: replace the inner HTML of element ID.
type swap struct {
	ID   string `json:"id"`
	HTML string `json:"html"`
}

// sendChanged sends a swap for every section whose HTML differs from what sent records,
// in a stable order, and records it.
func (s *stream) sendChanged(sections, sent map[string]string) error {
	for _, id := range slices.Sorted(maps.Keys(sections)) {
		html := sections[id]
		if prev, ok := sent[id]; ok && prev == html {
			continue
		}
		if err := s.send("swap", swap{ID: id, HTML: html}); err != nil {
			return err
		}
		sent[id] = html
	}
	return nil
}

// overviewEvents streams the overview's sections as the shared feed sees them change.
func (d *Dashboard) overviewEvents(w http.ResponseWriter, r *http.Request) {
	s, err := startStream(w)
	if err != nil {
		return
	}
	notify, snapshot, leave := d.feed.join()
	defer leave()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	sent := map[string]string{}
	for err == nil {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			err = s.comment("ping")
		case <-notify:
			err = s.sendChanged(snapshot(), sent)
		}
	}
}

// maxBatch bounds the output lines sent in one event.
const maxBatch = 500

// jobEvents streams a job page's changing sections and its output lines (the backlog first,
// as "reset", then "lines" batches) until the job is final; "end" then tells the page's
// script to close the stream.
func (d *Dashboard) jobEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !broker.IsJobID(id) {
		http.NotFound(w, r)
		return
	}
	s, err := startStream(w)
	if err != nil {
		return
	}
	js := &jobStream{d: d, s: s, id: id, sent: map[string]string{}}
	if d.cfg.Live != nil {
		backlog, lines, stop := d.cfg.Live.Watch(id)
		defer stop()
		js.lines = lines
		if err := s.send("reset", append([]string{}, backlog...)); err != nil {
			return
		}
	}
	js.run(r.Context())
}

// jobStream is one job page's event stream.
type jobStream struct {
	d     *Dashboard
	s     *stream
	id    string
	sent  map[string]string
	lines <-chan string // nil without a hub
}

func (js *jobStream) run(ctx context.Context) {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	final, err := js.refresh(ctx)
	for err == nil && !final {
		select {
		case <-ctx.Done():
			return
		case line := <-js.lines:
			err = js.sendLines(line)
		case <-tick.C:
			final, err = js.refresh(ctx)
		case <-ping.C:
			err = js.s.comment("ping")
		}
	}
	if err == nil && js.drain() == nil {
		_ = js.s.send("end", js.id)
	}
}

// refresh sends the sections that changed and reports whether the job is final. A failed
// read is tried again at the next tick; a job that does not exist ends the stream.
func (js *jobStream) refresh(ctx context.Context) (bool, error) {
	sections, final, err := js.d.jobSections(ctx, js.id)
	if errors.Is(err, broker.ErrNotFound) {
		return false, err
	}
	if err != nil {
		return false, ctx.Err()
	}
	return final, js.s.sendChanged(sections, js.sent)
}

// sendLines sends first and whatever else is already waiting, as one batch.
func (js *jobStream) sendLines(first string) error {
	batch := []string{first}
	for len(batch) < maxBatch {
		select {
		case line := <-js.lines:
			batch = append(batch, line)
		default:
			return js.s.send("lines", batch)
		}
	}
	return js.s.send("lines", batch)
}

// drain sends the lines still waiting once the job is final.
func (js *jobStream) drain() error {
	select {
	case line := <-js.lines:
		return js.sendLines(line)
	default:
		return nil
	}
}
