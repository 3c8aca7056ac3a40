package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/mail/outbox"
)

// relay refuses every message for good until it is opened, then keeps what it is sent.
type relay struct {
	mu   sync.Mutex
	open bool
	got  [][]byte
}

func (r *relay) Send(_ context.Context, _ string, _ []string, msg []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.open {
		return fmt.Errorf("%w: 550 5.1.1 no such user", outbox.ErrPermanent)
	}
	r.got = append(r.got, msg)
	return nil
}

func (r *relay) sent() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// TestParkedRepliesSendAgainAndDrop: two replies a relay refused are listed with their
// subjects and the relay's answer; Send again delivers one once the relay takes it, Drop
// removes the other, and acting on it again is a 404.
func TestParkedRepliesSendAgainAndDrop(t *testing.T) {
	t.Parallel()
	r := &relay{}
	o, err := outbox.Open(outbox.Config{Dir: t.TempDir(), Sender: r, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = o.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for i := range 2 {
		msg := fmt.Sprintf("From: edit@edit.example.com\r\nTo: a@example.com\r\nSubject: Re: Change %d\r\nMessage-ID: <reply%d@edit.example.com>\r\n\r\nDone.\r\n", i, i)
		if err := o.Enqueue(ctx, "edit@edit.example.com", []string{"a@example.com"}, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	parked := waitParked(t, o, 2)
	f := setup(t, options{replies: o})
	res, body := f.get("/replies")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, parked[0].ID) || !strings.Contains(body, "Re: Change 0") ||
		!strings.Contains(body, "no such user") || !strings.Contains(body, "a@example.com") {
		t.Fatalf("replies page %d:\n%s", res.StatusCode, body)
	}
	r.mu.Lock()
	r.open = true
	r.mu.Unlock()
	token := f.csrf("/replies")
	if res, body := f.post("/replies/"+parked[0].ID+"/retry", url.Values{"csrf": {token}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("send again: %d %s", res.StatusCode, body)
	}
	if res, body := f.post("/replies/"+parked[1].ID+"/drop", url.Values{"csrf": {token}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("drop: %d %s", res.StatusCode, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.sent() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the reply sent again did not reach the relay within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitParked(t, o, 0)
	if res, _ := f.post("/replies/"+parked[1].ID+"/retry", url.Values{"csrf": {token}}); res.StatusCode != http.StatusNotFound {
		t.Fatalf("send again of a dropped reply: %d; want 404", res.StatusCode)
	}
	if res, _ := f.post("/replies/..%2f..%2fetc/drop", url.Values{"csrf": {token}}); res.StatusCode != http.StatusNotFound {
		t.Fatalf("drop of a path: %d; want 404", res.StatusCode)
	}
}

func waitParked(t *testing.T, o *outbox.Outbox, n int) []outbox.Parked {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		parked, err := o.ParkedReplies(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(parked) == n {
			return parked
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d parked replies; want %d", len(parked), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
