package inbound

import (
	"strings"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/mail/message"
)

// loopVerdict says why a message must not be answered or run, or "" when it may.
func loopVerdict(m *message.Message, ourLocal string, ourDomains []string) string {
	if v := strings.ToLower(strings.TrimSpace(m.Header("Auto-Submitted"))); v != "" && v != "no" {
		return "Auto-Submitted: " + v + " (an automatic message)"
	}
	switch p := strings.ToLower(strings.TrimSpace(m.Header("Precedence"))); p {
	case "bulk", "list", "junk":
		return "Precedence: " + p
	}
	if m.Header("List-Id") != "" {
		return "a mailing list message (List-Id)"
	}
	from := strings.ToLower(m.From.Addr)
	local, _, _ := strings.Cut(from, "@")
	switch strings.TrimSuffix(local, "+") {
	case "mailer-daemon", "postmaster", "noreply", "no-reply", "donotreply", "do-not-reply", "bounce", "bounces":
		return "sender " + from + " is an automatic address"
	}
	base, _, _ := strings.Cut(local, "+")
	for _, d := range ourDomains {
		if strings.HasSuffix(from, "@"+d) && base == ourLocal {
			return "sender is our own address"
		}
	}
	return ""
}

// limiter is a fixed-window counter per key.
type limiter struct {
	mu     sync.Mutex
	max    int
	window time.Duration
	counts map[string]*window
}

type window struct {
	start time.Time
	n     int
}

func newLimiter(max int, per time.Duration) *limiter {
	return &limiter{max: max, window: per, counts: map[string]*window{}}
}

// allow counts one event for key; it reports whether it is within the limit and, when it is
// not, when the key's window ends.
func (l *limiter) allow(key string, now time.Time) (ok bool, until time.Time) {
	if l == nil || l.max <= 0 {
		return true, time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.counts[key]
	if w == nil || now.Sub(w.start) >= l.window {
		w = &window{start: now}
		l.counts[key] = w
	}
	w.n++
	return w.n <= l.max, w.start.Add(l.window)
}

// refund takes back one event counted for key (its message could not be submitted and will be
// handled again).
func (l *limiter) refund(key string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w := l.counts[key]; w != nil && w.n > 0 {
		w.n--
	}
}
