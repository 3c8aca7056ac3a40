package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/awstest"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/awsq/awsqtest"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
)

// TestMain stops the AWS emulators the awsq subtests started.
func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// engines are the shared engines the outbox is tested on; each gives two backends on one
// engine, as two serves have (their own connections, their own processes' view).
var engines = []struct {
	name string
	open func(t *testing.T) (a, b *broker.Backend)
}{
	{"natsjs", func(t *testing.T) (a, b *broker.Backend) {
		env := natsjstest.Start(t, natsjstest.Options{NoSync: true})
		_, b = natsjstest.Connect(t, env)
		return env.Backend, b
	}},
	{"awsq", func(t *testing.T) (a, b *broker.Backend) {
		cfg := awsqtest.Config(t, awsqtest.Options{}) // skips without the emulators (fails under CI)
		return awsqtest.Open(t, cfg), awsqtest.Open(t, cfg)
	}},
}

// onEveryEngine runs test on a fresh engine of each kind, in parallel subtests.
func onEveryEngine(t *testing.T, test func(t *testing.T, a, b *broker.Backend)) {
	t.Helper()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			a, b := e.open(t)
			test(t, a, b)
		})
	}
}

// engineConfig is an outbox on b's engine that delivers to s. No Dir: nothing is on disk.
func engineConfig(t *testing.T, b *broker.Backend, s *sink, clock *fakeClock) Config {
	t.Helper()
	e, err := OpenEngine(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	sender, err := NewSMTP(s.smtpConfig())
	if err != nil {
		t.Fatal(err)
	}
	return Config{Engine: e, Sender: sender, Now: clock.Now}
}

// queueKeys lists the engine's queued messages.
func queueKeys(t *testing.T, b *broker.Backend) []string {
	t.Helper()
	tb, err := b.Table(t.Context(), engineQueue)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := tb.Keys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestEngineOutboxOutlivesItsServe: on a shared engine a reply queued while the relay refuses
// it is kept in the engine, not on the serve's disk. The serve stops (a Fargate task ends and
// its disk with it); another serve on the same engine, with no disk of its own, sends the
// reply once, and remembers that it did: queueing it again is a no-op.
func TestEngineOutboxOutlivesItsServe(t *testing.T) {
	t.Parallel()
	onEveryEngine(t, func(t *testing.T, a, b *broker.Backend) {
		clock := newClock()
		down := startSink(t, sinkOptions{data: func(int) error { return smtpReply(421, "relay going down") }})
		first := openOutbox(t, engineConfig(t, a, down, clock))
		stop := startRun(t, first)
		msg := composeSample(t, "job-restart")
		if err := first.Enqueue(t.Context(), envFrom, envTo, msg); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the refused attempt", func() bool { return first.Stats().Retrying == 1 })
		stop()

		up := startSink(t, sinkOptions{})
		second := runOutbox(t, engineConfig(t, b, up, clock))
		clock.Advance(time.Second) // the retry after the first attempt is due
		second.nudge()
		waitFor(t, "delivery by the other serve", func() bool { return second.Stats().Sent == 1 })
		if got := up.messages(); len(got) != 1 || string(got[0].Data) != string(msg) {
			t.Fatalf("the relay got %d messages, want the queued reply once", len(got))
		}
		if keys := queueKeys(t, b); len(keys) != 0 {
			t.Fatalf("the engine still queues %v after delivery", keys)
		}
		if _, data := down.calls(); data != 1 {
			t.Errorf("the refusing relay saw %d attempts, want 1", data)
		}

		third := runOutbox(t, engineConfig(t, a, up, clock))
		if err := third.Enqueue(t.Context(), envFrom, envTo, msg); err != nil {
			t.Fatal(err)
		}
		if keys := queueKeys(t, a); len(keys) != 0 || third.Stats().Queued != 0 {
			t.Fatalf("a delivered reply queued again on a third serve: %v", keys)
		}
	})
}

// TestEngineOutboxTwoServesSendEachReplyOnce: two serves on one engine both queue the same
// replies (both heard of the same results), then start together: both find every reply in
// the engine and race for each; each reply reaches the relay exactly once.
func TestEngineOutboxTwoServesSendEachReplyOnce(t *testing.T) {
	t.Parallel()
	onEveryEngine(t, func(t *testing.T, a, b *broker.Backend) {
		clock := newClock()
		s := startSink(t, sinkOptions{})
		one := openOutbox(t, engineConfig(t, a, s, clock))
		two := openOutbox(t, engineConfig(t, b, s, clock))
		const n = 12
		var wg sync.WaitGroup
		for i := range n {
			msg := composeSample(t, fmt.Sprintf("job-both-%d", i))
			for _, o := range []*Outbox{one, two} {
				wg.Go(func() {
					if err := o.Enqueue(context.Background(), envFrom, envTo, msg); err != nil {
						t.Error(err)
					}
				})
			}
		}
		wg.Wait()
		start := time.Now()
		stopOne, stopTwo := startRun(t, one), startRun(t, two)
		waitFor(t, "every reply sent", func() bool { return one.Stats().Sent+two.Stats().Sent >= n })
		took := time.Since(start)
		stopOne()
		stopTwo()
		var ids []string
		for _, m := range s.messages() {
			ids = append(ids, parse(t, m.Data).Header.Get("Message-ID"))
		}
		slices.Sort(ids)
		if len(ids) != n || len(slices.Compact(slices.Clone(ids))) != n {
			t.Fatalf("the relay got %d messages (%d distinct), want %d, each once: %v", len(ids), len(slices.Compact(slices.Clone(ids))), n, ids)
		}
		if sent := one.Stats().Sent + two.Stats().Sent; sent != n {
			t.Errorf("the serves counted %d sends, want %d", sent, n)
		}
		t.Logf("%d replies sent in %s: serve one sent %d, serve two %d", n, took.Round(time.Millisecond), one.Stats().Sent, two.Stats().Sent)
	})
}

// stuckSender signals that a send started, then never returns until released: a serve that
// died mid-send (its claim stays in the engine).
type stuckSender struct {
	started chan struct{}
	release chan struct{}
}

func (s stuckSender) Send(ctx context.Context, from string, to []string, msg []byte) error {
	close(s.started)
	<-s.release
	return errors.New("the stuck serve gave up: temporary")
}

// TestEngineOutboxTakesOverADeadServesClaim: a serve that claimed a reply and died holds it
// only until its claim's lease ends; no other serve sends it before, and one sends it after.
func TestEngineOutboxTakesOverADeadServesClaim(t *testing.T) {
	t.Parallel()
	onEveryEngine(t, func(t *testing.T, a, b *broker.Backend) {
		clock := newClock()
		s := startSink(t, sinkOptions{})
		stuck := stuckSender{started: make(chan struct{}), release: make(chan struct{})}
		deadCfg := engineConfig(t, a, s, clock)
		deadCfg.Sender = stuck
		dead := openOutbox(t, deadCfg)
		stopDead := startRun(t, dead)
		t.Cleanup(func() { close(stuck.release); stopDead() }) // runs before startRun's cleanup
		if err := dead.Enqueue(t.Context(), envFrom, envTo, composeSample(t, "job-stuck")); err != nil {
			t.Fatal(err)
		}
		<-stuck.started

		cfg := engineConfig(t, b, s, clock)
		live := runOutbox(t, cfg)
		key := spoolKey("wo-job-stuck-done@example.com")
		until := clock.Now().Add(cfg.Engine.lease())
		waitFor(t, "the live serve to see the claim", func() bool {
			live.mu.Lock()
			defer live.mu.Unlock()
			return live.queued[key].NextAt.Equal(until)
		})
		if got := len(s.messages()); got != 0 {
			t.Fatalf("the relay got %d messages while the dead serve's claim was live", got)
		}
		clock.Advance(cfg.Engine.lease() + time.Second)
		live.nudge()
		waitFor(t, "the take-over", func() bool { return live.Stats().Sent == 1 })
		if got := len(s.messages()); got != 1 {
			t.Fatalf("the relay got %d messages, want 1", got)
		}
	})
}

// TestEngineOutboxParksWhatCannotBeSent: a reply the relay refuses for good is parked in the
// engine with its error and its message, and every serve counts it.
func TestEngineOutboxParksWhatCannotBeSent(t *testing.T) {
	t.Parallel()
	onEveryEngine(t, func(t *testing.T, a, b *broker.Backend) {
		clock := newClock()
		s := startSink(t, sinkOptions{rcpt: func(int) error { return smtpReply(550, "no such user") }})
		o := runOutbox(t, engineConfig(t, a, s, clock))
		msg := composeSample(t, "job-bounced")
		if err := o.Enqueue(t.Context(), envFrom, envTo, msg); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the reply to be parked", func() bool { return o.Stats().Failed == 1 })
		if keys := queueKeys(t, a); len(keys) != 0 {
			t.Fatalf("a parked reply is still queued: %v", keys)
		}
		e, err := OpenEngine(t.Context(), b)
		if err != nil {
			t.Fatal(err)
		}
		key := spoolKey("wo-job-bounced-done@example.com")
		data, _, err := e.Failed.Get(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		var rec failedRecord
		if err := json.Unmarshal(data, &rec); err != nil || rec.Attempts != 1 || !strings.Contains(rec.LastError, "550") {
			t.Fatalf("parked record %s: %v", data, err)
		}
		if kept, _, err := e.Bodies.Get(t.Context(), rec.Body); err != nil || string(kept) != string(msg) {
			t.Fatalf("the parked reply's message: %v", err)
		}
		other := runOutbox(t, engineConfig(t, b, s, clock))
		waitFor(t, "the other serve to count it", func() bool { return other.Stats().Failed == 1 })
	})
}

// TestEngineOutboxDropsAReplySentBeforeItsServeStopped: a serve that sent a reply and
// recorded it, but stopped before removing the entry, leaves it queued; the next serve finds
// the record and drops the entry instead of sending the reply again.
func TestEngineOutboxDropsAReplySentBeforeItsServeStopped(t *testing.T) {
	t.Parallel()
	onEveryEngine(t, func(t *testing.T, a, b *broker.Backend) {
		clock := newClock()
		s := startSink(t, sinkOptions{})
		first := openOutbox(t, engineConfig(t, a, s, clock)) // never runs: it stops first
		if err := first.Enqueue(t.Context(), envFrom, envTo, composeSample(t, "job-recorded")); err != nil {
			t.Fatal(err)
		}
		key := spoolKey("wo-job-recorded-done@example.com")
		if _, err := first.cfg.Engine.Sent.Put(t.Context(), key, []byte(clock.Now().Format(time.RFC3339Nano))); err != nil {
			t.Fatal(err)
		}
		next := runOutbox(t, engineConfig(t, b, s, clock))
		waitFor(t, "the entry to be dropped", func() bool { return len(queueKeys(t, b)) == 0 })
		if got := len(s.messages()); got != 0 || next.Stats().Sent != 0 {
			t.Fatalf("a reply already sent went out again (%d at the relay)", got)
		}
	})
}

// TestEngineOutboxTakesInASpoolLeftOnDisk: a serve from before the engine kept the outbox
// left replies queued in its spool (its relay was down), and one it had sent. The serve that
// starts on the engine with that data directory moves the queued ones into the engine, where
// they are sent once, and leaves the sent one alone; nothing stays queued on disk.
func TestEngineOutboxTakesInASpoolLeftOnDisk(t *testing.T) {
	t.Parallel()
	onEveryEngine(t, func(t *testing.T, a, _ *broker.Backend) {
		clock := newClock()
		dir := t.TempDir()
		down := startSink(t, sinkOptions{data: func(int) error { return smtpReply(421, "relay going down") }})
		downSender, err := NewSMTP(down.smtpConfig())
		if err != nil {
			t.Fatal(err)
		}
		up := startSink(t, sinkOptions{})
		upSender, err := NewSMTP(up.smtpConfig())
		if err != nil {
			t.Fatal(err)
		}
		sent := composeSample(t, "job-sent-from-disk")
		before := runOutbox(t, Config{Dir: dir, Sender: upSender, Now: clock.Now})
		if err := before.Enqueue(t.Context(), envFrom, envTo, sent); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the first reply sent from disk", func() bool { return before.Stats().Sent == 1 })
		older := openOutbox(t, Config{Dir: dir, Sender: downSender, Now: clock.Now})
		stop := startRun(t, older)
		var left [][]byte
		for _, job := range []string{"job-left-1", "job-left-2"} {
			msg := composeSample(t, job)
			left = append(left, msg)
			if err := older.Enqueue(t.Context(), envFrom, envTo, msg); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "the refused attempts", func() bool { return older.Stats().Retrying == 2 })
		stop()

		cfg := engineConfig(t, a, up, clock)
		cfg.Dir = dir
		now := runOutbox(t, cfg)
		if err := now.Enqueue(t.Context(), envFrom, envTo, sent); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		now.nudge()
		waitFor(t, "the replies left on disk sent from the engine", func() bool { return now.Stats().Sent == 2 })
		got := up.messages()
		if len(got) != 3 { // the one sent from disk, then the two left
			t.Fatalf("the relay got %d messages, want 3: each reply once", len(got))
		}
		for _, msg := range left {
			if !slices.ContainsFunc(got[1:], func(m received) bool { return string(m.Data) == string(msg) }) {
				t.Errorf("a reply left on disk did not reach the relay:\n%.200s", msg)
			}
		}
		assertEmpty(t, filepath.Join(dir, queueDir))
		if keys := queueKeys(t, a); len(keys) != 0 {
			t.Fatalf("the engine still queues %v after delivery", keys)
		}
	})
}
