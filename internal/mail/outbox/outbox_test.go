package outbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	envFrom = "edit@example.com"
	envTo   = []string{"owner@example.org"}
)

// setup starts a sink and returns a config for an outbox delivering to it.
func setup(t *testing.T, opts sinkOptions) (*sink, Config, *fakeClock) {
	t.Helper()
	s := startSink(t, opts)
	sender, err := NewSMTP(s.smtpConfig())
	if err != nil {
		t.Fatal(err)
	}
	clock := newClock()
	return s, Config{Dir: t.TempDir(), Sender: sender, Now: clock.Now}, clock
}

// queuedMeta returns the spool record of the only queued message.
func queuedMeta(t *testing.T, o *Outbox) meta {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.queued) != 1 {
		t.Fatalf("%d messages queued, want 1", len(o.queued))
	}
	for _, m := range o.queued {
		return m
	}
	return meta{}
}

func attemptsMade(o *Outbox) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range o.queued {
		return m.Attempts
	}
	return -1
}

func TestOutboxRetriesTemporaryFailures(t *testing.T) {
	t.Parallel()
	s, cfg, clock := setup(t, sinkOptions{data: firstN(2, smtpReply(451, "greylisted, try again"))})
	o := runOutbox(t, cfg)
	if err := o.Enqueue(context.Background(), envFrom, envTo, composeSample(t, "job-retry")); err != nil {
		t.Fatal(err)
	}
	for attempt, wait := range []time.Duration{time.Second, 2 * time.Second} {
		waitFor(t, fmt.Sprintf("attempt %d to fail", attempt+1), func() bool { return attemptsMade(o) == attempt+1 })
		m := queuedMeta(t, o)
		if want := clock.Now().Add(wait); !m.NextAt.Equal(want) || !strings.Contains(m.LastError, "451") {
			t.Fatalf("after attempt %d: next at %v (want %v), last error %q", attempt+1, m.NextAt, want, m.LastError)
		}
		if st := o.Stats(); st.Queued != 1 || st.Retrying != 1 {
			t.Errorf("stats while retrying = %+v", st)
		}
		clock.Advance(wait)
		o.nudge()
	}
	waitFor(t, "delivery", func() bool { return o.Stats().Sent == 1 })
	if got := len(s.messages()); got != 1 {
		t.Errorf("sink got %d messages, want exactly 1", got)
	}
	if _, data := s.calls(); data != 3 {
		t.Errorf("DATA was tried %d times, want 3", data)
	}
	if st := o.Stats(); st != (Stats{Sent: 1}) {
		t.Errorf("stats = %+v", st)
	}
}

func TestOutboxParksPermanentFailure(t *testing.T) {
	t.Parallel()
	s, cfg, _ := setup(t, sinkOptions{rcpt: func(int) error { return smtpReply(550, "no such user") }})
	o := runOutbox(t, cfg)
	msg := composeSample(t, "job-550")
	if err := o.Enqueue(context.Background(), envFrom, envTo, msg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the message to be parked", func() bool { return o.Stats().Failed == 1 })
	m, parked := readParked(t, cfg.Dir, "wo-job-550-done@example.com")
	if m.Attempts != 1 || !strings.Contains(m.LastError, "550") || !strings.Contains(m.LastError, "permanent") {
		t.Errorf("parked record: attempts %d, error %q", m.Attempts, m.LastError)
	}
	if string(parked) != string(msg) {
		t.Error("parked message differs from the enqueued one")
	}
	if rcpt, _ := s.calls(); rcpt != 1 {
		t.Errorf("RCPT tried %d times, want 1 (no retries)", rcpt)
	}
	if st := o.Stats(); st.Queued != 0 || st.Sent != 0 {
		t.Errorf("stats = %+v", st)
	}
	assertEmpty(t, filepath.Join(cfg.Dir, queueDir))
}

func TestOutboxParksAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	s, cfg, clock := setup(t, sinkOptions{data: func(int) error { return smtpReply(421, "going down") }})
	cfg.MaxAttempts = 3
	o := runOutbox(t, cfg)
	if err := o.Enqueue(context.Background(), envFrom, envTo, composeSample(t, "job-tired")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the message to be parked", func() bool {
		clock.Advance(time.Second) // 1s and 2s backoffs
		o.nudge()
		return o.Stats().Failed == 1
	})
	if _, data := s.calls(); data != 3 {
		t.Errorf("DATA tried %d times, want MaxAttempts (3)", data)
	}
	if m, _ := readParked(t, cfg.Dir, "wo-job-tired-done@example.com"); m.Attempts != 3 || !strings.Contains(m.LastError, "421") {
		t.Errorf("parked record: attempts %d, error %q", m.Attempts, m.LastError)
	}
}

func TestOutboxDeliversAfterCrashBeforeSend(t *testing.T) {
	t.Parallel()
	s, cfg, _ := setup(t, sinkOptions{})
	first := openOutbox(t, cfg)
	stop := startRun(t, first)
	stop() // the process "crashes" before it sends anything
	if err := first.Enqueue(context.Background(), envFrom, envTo, composeSample(t, "job-crash")); err != nil {
		t.Fatal(err)
	}

	second := runOutbox(t, cfg)
	waitFor(t, "delivery by the new instance", func() bool { return len(s.messages()) == 1 })
	waitFor(t, "the spool to catch up", func() bool { return second.Stats() == Stats{Sent: 1} })
	assertEmpty(t, filepath.Join(cfg.Dir, queueDir))
}

// sendThenHang delivers, then hangs until cancelled: a crash after sending but before the
// spool is updated.
type sendThenHang struct{ Sender }

func (s sendThenHang) Send(ctx context.Context, from string, to []string, msg []byte) error {
	if err := s.Sender.Send(ctx, from, to, msg); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
}

func TestOutboxResendsAfterCrashAfterSend(t *testing.T) {
	t.Parallel()
	s, cfg, _ := setup(t, sinkOptions{})
	crashing := cfg
	crashing.Sender = sendThenHang{cfg.Sender}
	first := openOutbox(t, crashing)
	stop := startRun(t, first)
	if err := first.Enqueue(context.Background(), envFrom, envTo, composeSample(t, "job-twice")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first delivery", func() bool { return len(s.messages()) == 1 })
	stop()

	second := runOutbox(t, cfg)
	waitFor(t, "the second delivery", func() bool { return second.Stats().Sent == 1 })
	got := s.messages()
	if len(got) != 2 {
		t.Fatalf("sink got %d messages, want 2 (at least once)", len(got))
	}
	a, b := parse(t, got[0].Data).Header.Get("Message-ID"), parse(t, got[1].Data).Header.Get("Message-ID")
	if a != b || a != "<wo-job-twice-done@example.com>" {
		t.Errorf("Message-IDs %q and %q, want the same stable id", a, b)
	}
}

func TestOutboxDropsQueuedCopyOfDeliveredMessage(t *testing.T) {
	t.Parallel()
	_, cfg, clock := setup(t, sinkOptions{})
	first := openOutbox(t, cfg)
	msg := composeSample(t, "job-marked")
	if err := first.Enqueue(context.Background(), envFrom, envTo, msg); err != nil {
		t.Fatal(err)
	}
	// Crash after recording the delivery, before removing the queue file.
	if err := first.keep.(diskStore).markSent(spoolKey("wo-job-marked-done@example.com"), clock.Now()); err != nil {
		t.Fatal(err)
	}
	second := openOutbox(t, cfg)
	if st := second.Stats(); st.Queued != 0 {
		t.Errorf("reopened outbox queued %d, want 0: the message was already delivered", st.Queued)
	}
	assertEmpty(t, filepath.Join(cfg.Dir, queueDir))
}

func TestOutboxEnqueueIsIdempotent(t *testing.T) {
	t.Parallel()
	s, cfg, clock := setup(t, sinkOptions{})
	o := openOutbox(t, cfg)
	msg := composeSample(t, "job-dup")
	enqueueConcurrently(t, o, msg, msg, msg)
	if st := o.Stats(); st.Queued != 1 {
		t.Fatalf("queued %d, want 1", st.Queued)
	}
	startRun(t, o)
	waitFor(t, "delivery", func() bool { return o.Stats().Sent == 1 })

	clock.Advance(23 * time.Hour)
	enqueueConcurrently(t, o, msg)
	if st := o.Stats(); st.Queued != 0 || len(s.messages()) != 1 {
		t.Errorf("re-enqueue within 24h: stats %+v, %d delivered; want a no-op", st, len(s.messages()))
	}

	clock.Advance(2 * time.Hour)
	enqueueConcurrently(t, o, msg)
	waitFor(t, "redelivery after the dedup window", func() bool { return o.Stats().Sent == 2 })
}

func TestOutboxDeliversConcurrentEnqueues(t *testing.T) {
	t.Parallel()
	s, cfg, _ := setup(t, sinkOptions{})
	o := runOutbox(t, cfg)
	var msgs [][]byte
	for i := range 8 {
		msgs = append(msgs, composeSample(t, fmt.Sprintf("job-%d", i)))
	}
	enqueueConcurrently(t, o, msgs...)
	waitFor(t, "all deliveries", func() bool { return o.Stats().Sent == 8 })
	if got := len(s.messages()); got != 8 {
		t.Errorf("sink got %d messages, want 8", got)
	}
}

func TestOutboxEnqueueRejects(t *testing.T) {
	t.Parallel()
	_, cfg, _ := setup(t, sinkOptions{})
	o := openOutbox(t, cfg)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		to   []string
		msg  []byte
		want error
	}{
		{"no message id", context.Background(), envTo, []byte("Subject: x\r\n\r\nhi\r\n"), ErrNoMessageID},
		{"cancelled", cancelled, envTo, composeSample(t, "j"), context.Canceled},
		{"no recipients", context.Background(), nil, composeSample(t, "j"), nil},
	}
	for _, tt := range tests {
		err := o.Enqueue(tt.ctx, envFrom, tt.to, tt.msg)
		if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	if st := o.Stats(); st.Queued != 0 {
		t.Errorf("rejected messages were queued: %+v", st)
	}
}

func TestOpenValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no dir", Config{Sender: Dir{}}, "Dir (or Engine) is required"},
		{"no sender", Config{Dir: t.TempDir()}, "Sender is required"},
		{"bad attempts", Config{Dir: t.TempDir(), Sender: Dir{}, MaxAttempts: -1}, "MaxAttempts"},
	}
	for _, tt := range tests {
		_, err := Open(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tt.name, err, tt.want)
		}
	}
}

func TestOpenQuarantinesCorruptRecords(t *testing.T) {
	t.Parallel()
	_, cfg, _ := setup(t, sinkOptions{})
	openOutbox(t, cfg) // creates the layout
	if err := os.WriteFile(filepath.Join(cfg.Dir, queueDir, "bad"+msgExt), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := openOutbox(t, cfg)
	if st := o.Stats(); st.Queued != 0 || st.Failed != 1 {
		t.Errorf("stats = %+v, want the corrupt record counted as failed", st)
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, failedDir, "bad.corrupt")); err != nil {
		t.Error(err)
	}
}

func TestRunTwiceIsRefused(t *testing.T) {
	t.Parallel()
	_, cfg, _ := setup(t, sinkOptions{})
	o := runOutbox(t, cfg)
	waitFor(t, "Run to start", o.running.Load)
	if err := o.Run(context.Background()); err == nil {
		t.Error("a second concurrent Run was allowed")
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	tests := map[int]time.Duration{
		1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 10: 512 * time.Second,
		11: maxBackoff, 20: maxBackoff, 1000: maxBackoff,
	}
	for n, want := range tests {
		if got := backoff(n); got != want {
			t.Errorf("backoff(%d) = %v, want %v", n, got, want)
		}
	}
}

// enqueueConcurrently enqueues every message from its own goroutine.
func enqueueConcurrently(t *testing.T, o *Outbox, msgs ...[]byte) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(msgs))
	for _, msg := range msgs {
		wg.Go(func() { errs <- o.Enqueue(context.Background(), envFrom, envTo, msg) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// readParked reads the failed/ record of a Message-ID.
func readParked(t *testing.T, dir, messageID string) (meta, []byte) {
	t.Helper()
	m, msg, err := readRecord(filepath.Join(dir, failedDir, spoolKey(messageID)+msgExt))
	if err != nil {
		t.Fatal(err)
	}
	return m, msg
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("%s holds %d entries, want none", dir, len(entries))
	}
}
