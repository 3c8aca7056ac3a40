package inbound_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/mail/inbound"
)

// TestStillOnItNoteOncePerJob: a job whose agent waits for a busy model service for over
// WaitNoteAfter, one queued that long behind the sender's earlier one, and one queued behind
// other work, each get one short threaded "still on it" note saying why; a mail router
// started afresh sends none again.
func TestStillOnItNoteOncePerJob(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64 // the test's clock runs ahead of the real one by this much
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	f := setupWith(t, func(c *inbound.Config) { c.Now, c.WaitNoteAfter = now, -1 }) // Run sends none: the test does
	cfg := f.cfg
	cfg.WaitNoteAfter = time.Minute
	in, err := inbound.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	busy := f.handle(f.mail("alice@example.com", "edit@edit.example.net", "b1@example.com", "", "Add our opening hours.", "example.com"), "alice@example.com")
	queued := f.handle(f.mail("alice@example.com", "edit@edit.example.net", "q1@example.com", "", "Make the header green.", "example.com"), "alice@example.com")
	other := f.handle(f.mail("bob@bob.example", "edit@edit.example.net", "o1@bob.example", "", "Fix the typo.", "bob.example"), "bob@bob.example")
	if queued.JobID == "" || busy.JobID == "" || other.JobID == "" {
		t.Fatalf("jobs not queued: %+v %+v %+v", busy.Decision, queued.Decision, other.Decision)
	}
	_, err = f.b.Jobs.Update(ctx, busy.JobID, func(r *broker.JobRecord) error {
		r.State, r.Attempts, r.BusySince = broker.StateRunning, 1, now().Add(30*time.Second)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	notes := func(want int) {
		t.Helper()
		if n, err := in.NoteWaits(ctx); n != want || err != nil {
			t.Fatalf("at +%s: %d notes (%v), want %d", time.Duration(offset.Load()), n, err, want)
		}
	}
	notes(0) // nothing has waited a minute yet
	offset.Store(int64(61 * time.Second))
	notes(2) // the queued jobs; the busy one has waited 31 s
	text := f.replyTo("q1@example.com")
	if !strings.Contains(text, "Still on it: I'm finishing your earlier requests first") || strings.Contains(text, "Make the header green") {
		t.Errorf("the note of the job queued behind the sender's earlier one:\n%s", text)
	}
	if text := f.replyTo("o1@bob.example"); !strings.Contains(text, "Still on it: I'm busy with other work") {
		t.Errorf("the note of a job queued behind other work:\n%s", text)
	}
	offset.Store(int64(91 * time.Second))
	notes(1)
	if text := f.replyTo("b1@example.com"); !strings.Contains(text, "the AI service I use is busy") || !strings.Contains(text, "don't need to send anything again") {
		t.Errorf("the busy job's note:\n%s", text)
	}
	notes(0) // once per job
	restarted, err := inbound.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := restarted.NoteWaits(ctx); n != 0 || err != nil {
		t.Fatalf("a mail router started afresh sent %d notes again (%v)", n, err)
	}
	if got := len(f.sent(3)); got != 3 {
		t.Errorf("%d replies sent, want the 3 notes", got)
	}
}
