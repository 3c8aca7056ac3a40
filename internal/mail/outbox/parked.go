package outbox

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/mail"
	"slices"
	"time"
)

// Parked is a reply the outbox gave up on (a permanent refusal, or every attempt failed): it
// waits for an operator to send it again (Retry) or drop it (Drop).
type Parked struct {
	// ID names the reply in Retry and Drop.
	ID        string    `json:"id"`
	MessageID string    `json:"messageId,omitempty"`
	To        []string  `json:"to,omitempty"`
	Subject   string    `json:"subject,omitempty"`
	Enqueued  time.Time `json:"enqueued,omitzero"`
	Attempts  int       `json:"attempts"`
	// Error is why the last attempt failed, or why the record cannot be read.
	Error string `json:"error"`
	// Unreadable: the record is damaged; it can only be dropped.
	Unreadable bool `json:"unreadable,omitempty"`
}

// ErrNotParked is returned by Retry and Drop for an ID that names no parked reply.
var ErrNotParked = errors.New("no such parked reply")

// errUnreadable refuses to send again a parked record that cannot be read.
var errUnreadable = errors.New("the parked reply cannot be read, so it cannot be sent; drop it")

// parkedRecord is a parked message as a store keeps it; msg is nil when unreadable.
type parkedRecord struct {
	key string
	m   meta
	msg []byte
	bad error
}

// view is the operator's view of r.
func (r parkedRecord) view() Parked {
	p := Parked{ID: r.key, MessageID: r.m.MessageID, To: r.m.To, Enqueued: r.m.Enqueued,
		Attempts: r.m.Attempts, Error: r.m.LastError, Subject: subjectOf(r.msg)}
	if r.bad != nil {
		p.Unreadable, p.Error = true, cmp.Or(p.Error, r.bad.Error())
	}
	return p
}

// subjectOf returns msg's decoded Subject, empty when it has none.
func subjectOf(msg []byte) string {
	if len(msg) == 0 {
		return ""
	}
	head, _, _ := bytes.Cut(msg, []byte("\r\n\r\n"))
	m, err := mail.ReadMessage(bytes.NewReader(append(head, "\r\n\r\n"...)))
	if err != nil {
		return ""
	}
	s := m.Header.Get("Subject")
	if d, err := new(mime.WordDecoder).DecodeHeader(s); err == nil {
		return d
	}
	return s
}

// validKey reports whether id has the form of a spool key (a hex digest), so that an ID from
// a request never names a path or a key outside the outbox.
func validKey(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ParkedReplies lists the parked replies, oldest first.
func (o *Outbox) ParkedReplies(ctx context.Context) ([]Parked, error) {
	recs, err := o.keep.parked(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox: list parked replies: %w", err)
	}
	out := make([]Parked, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.view())
	}
	slices.SortFunc(out, func(a, b Parked) int { return cmp.Or(a.Enqueued.Compare(b.Enqueued), cmp.Compare(a.ID, b.ID)) })
	return out, nil
}

// ParkedCount is how many replies are parked, as this outbox last counted them (at start,
// at each park, retry and drop, and at each read of a shared engine's queue): cheap enough
// for a status read.
func (o *Outbox) ParkedCount() int { return o.Stats().Failed }

// Retry queues the parked reply id again with its attempts counted afresh, to be sent now.
// ErrNotParked when there is none.
func (o *Outbox) Retry(ctx context.Context, id string) error {
	if !validKey(id) {
		return fmt.Errorf("outbox: retry %q: %w", id, ErrNotParked)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	m, err := o.keep.unpark(ctx, id, o.cfg.Now())
	if err != nil {
		return fmt.Errorf("outbox: retry %s: %w", id, err)
	}
	o.queued[id] = m
	o.failed = max(o.failed-1, 0)
	o.log.InfoContext(ctx, "outbox: parked reply queued again", "message_id", m.MessageID)
	o.nudge()
	return nil
}

// Drop removes the parked reply id for good. ErrNotParked when there is none.
func (o *Outbox) Drop(ctx context.Context, id string) error {
	if !validKey(id) {
		return fmt.Errorf("outbox: drop %q: %w", id, ErrNotParked)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.keep.drop(ctx, id); err != nil {
		return fmt.Errorf("outbox: drop %s: %w", id, err)
	}
	o.failed = max(o.failed-1, 0)
	o.log.InfoContext(ctx, "outbox: parked reply dropped", "id", id)
	return nil
}

// fresh is m queued again by an operator at now: every attempt available, due now.
func fresh(m meta, now time.Time) meta {
	m.Attempts, m.NextAt = 0, now
	return m
}
