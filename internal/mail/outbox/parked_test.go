package outbox

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
)

// refusingUntil is a sink that refuses every recipient for good until accept is set.
func refusingUntil(t *testing.T, accept *atomic.Bool) *sink {
	return startSink(t, sinkOptions{rcpt: func(int) error {
		if accept.Load() {
			return nil
		}
		return smtpReply(550, "no such user")
	}})
}

// checkParkedShelf parks two replies on o, lists them through lister (another serve's
// outbox on a shared engine, or o itself), sends one again and drops the other. seen, when
// set, is told the parked replies' IDs before anything is done with them.
func checkParkedShelf(t *testing.T, o, lister *Outbox, s *sink, accept *atomic.Bool, seen func(ids ...string)) {
	t.Helper()
	ctx := t.Context()
	for _, job := range []string{"job-parked-a", "job-parked-b"} {
		if err := o.Enqueue(ctx, envFrom, envTo, composeSample(t, job)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "both replies to be parked", func() bool { return o.Stats().Failed == 2 })
	parked, err := lister.ParkedReplies(ctx)
	if err != nil || len(parked) != 2 {
		t.Fatalf("parked replies: %+v, %v", parked, err)
	}
	byMID := map[string]Parked{}
	for _, p := range parked {
		byMID[p.MessageID] = p
		if !strings.Contains(p.Error, "550") || p.Subject == "" || len(p.To) != 1 || p.Unreadable {
			t.Errorf("parked reply as listed: %+v", p)
		}
	}
	a, b := byMID["wo-job-parked-a-done@example.com"], byMID["wo-job-parked-b-done@example.com"]
	if a.ID == "" || b.ID == "" {
		t.Fatalf("parked replies by Message-ID: %+v", byMID)
	}
	if seen != nil {
		seen(a.ID, b.ID)
	}

	accept.Store(true)
	if err := lister.Retry(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the retried reply to be sent", func() bool { return len(s.messages()) == 1 })
	if got := parse(t, s.messages()[0].Data).subject(t); got != a.Subject {
		t.Errorf("sent %q, want the retried reply %q", got, a.Subject)
	}
	if err := lister.Drop(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if left, err := lister.ParkedReplies(ctx); err != nil || len(left) != 0 {
		t.Fatalf("parked after retry and drop: %+v, %v", left, err)
	}
	for _, id := range []string{a.ID, b.ID, "../../etc/passwd", strings.Repeat("0", 32)} {
		if err := lister.Retry(ctx, id); !errors.Is(err, ErrNotParked) {
			t.Errorf("Retry(%q) = %v, want ErrNotParked", id, err)
		}
		if err := lister.Drop(ctx, id); !errors.Is(err, ErrNotParked) {
			t.Errorf("Drop(%q) = %v, want ErrNotParked", id, err)
		}
	}
	if n := len(s.messages()); n != 1 {
		t.Errorf("%d messages sent, want 1 (the dropped one never)", n)
	}
}

// TestParkedRepliesCanBeSentAgainOrDropped: an operator lists the replies the relay refused,
// sends one again once the relay takes it, and drops the other; on disk nothing of either
// is left in the spool.
func TestParkedRepliesCanBeSentAgainOrDropped(t *testing.T) {
	t.Parallel()
	var accept atomic.Bool
	s := refusingUntil(t, &accept)
	sender, err := NewSMTP(s.smtpConfig())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o := runOutbox(t, Config{Dir: dir, Sender: sender, Now: newClock().Now})
	checkParkedShelf(t, o, o, s, &accept, nil)
	assertEmpty(t, filepath.Join(dir, queueDir))
	assertEmpty(t, filepath.Join(dir, failedDir))
}

// TestEngineParkedRepliesCanBeSentAgainOrDropped: on a shared engine, another serve lists
// the parked replies, sends one again and drops the other, and the engine keeps no body of
// either.
func TestEngineParkedRepliesCanBeSentAgainOrDropped(t *testing.T) {
	t.Parallel()
	onEveryEngine(t, func(t *testing.T, a, b *broker.Backend) {
		var accept atomic.Bool
		s := refusingUntil(t, &accept)
		clock := newClock()
		o := runOutbox(t, engineConfig(t, a, s, clock))
		other := runOutbox(t, engineConfig(t, b, s, clock))
		e, err := OpenEngine(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		var bodies []string
		checkParkedShelf(t, o, other, s, &accept, func(ids ...string) {
			for _, id := range ids {
				data, _, err := e.Failed.Get(t.Context(), id)
				var rec failedRecord
				if err != nil || json.Unmarshal(data, &rec) != nil || rec.Body == "" {
					t.Fatalf("parked record %s: %s, %v", id, data, err)
				}
				bodies = append(bodies, rec.Body)
			}
		})
		for _, body := range bodies {
			waitFor(t, "the message "+body+" to be gone", func() bool {
				_, _, err := e.Bodies.Get(t.Context(), body)
				return errors.Is(err, broker.ErrNotFound)
			})
		}
	})
}

// TestAnUnreadableParkedRecordCanOnlyBeDropped: a queued record load could not read is
// listed as unreadable; sending it again is refused with what to do, dropping it works.
func TestAnUnreadableParkedRecordCanOnlyBeDropped(t *testing.T) {
	t.Parallel()
	_, cfg, _ := setup(t, sinkOptions{})
	if err := os.MkdirAll(filepath.Join(cfg.Dir, queueDir), 0o700); err != nil {
		t.Fatal(err)
	}
	key := spoolKey("<broken@example.com>")
	if err := os.WriteFile(filepath.Join(cfg.Dir, queueDir, key+msgExt), []byte("not a record"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := openOutbox(t, cfg)
	parked, err := o.ParkedReplies(t.Context())
	if err != nil || len(parked) != 1 || !parked[0].Unreadable || parked[0].ID != key {
		t.Fatalf("parked: %+v, %v", parked, err)
	}
	if err := o.Retry(t.Context(), key); err == nil || !strings.Contains(err.Error(), "drop it") {
		t.Fatalf("Retry of an unreadable record = %v, want a refusal saying to drop it", err)
	}
	if err := o.Drop(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, filepath.Join(cfg.Dir, failedDir))
}
