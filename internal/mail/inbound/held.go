package inbound

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/mail/outbox"
)

// maxHeldListed bounds the messages one notice lists by name; the rest are counted.
const maxHeldListed = 200

// heldNotices gathers, per sender, the messages held in the current limit window, for the one
// notice Run sends them. With Config.Notices, every batch is stored before its message is
// held, so a restart still sends the notice.
type heldNotices struct {
	mu       sync.Mutex
	bySender map[string]*heldBatch
	loaded   bool
}

// heldBatch is one sender's held messages in one window.
type heldBatch struct {
	Sender string     `json:"sender"`
	Until  time.Time  `json:"until"` // the window's end: later messages open a new batch
	Last   time.Time  `json:"last"`  // when the last one was held
	Items  []heldItem `json:"items"`
	More   int        `json:"more,omitempty"` // held beyond the Items listed
	Sent   bool       `json:"sent,omitempty"`
}

// heldItem is one held message as the notice names it.
type heldItem struct {
	MessageID  string   `json:"messageId,omitempty"`
	Subject    string   `json:"subject,omitempty"`
	Line       string   `json:"line"`
	References []string `json:"references,omitempty"`
}

// noticeKey is a sender's key in the Notices table.
func noticeKey(sender string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(sender)))
	return "h" + hex.EncodeToString(sum[:12])
}

// noteHeld adds a held message to its sender's batch and stores the batch; an error means the
// message must not be held yet (handle it again later). After the window's notice went out,
// the sender has been told that more will be held, so the message is not noted again.
func (in *Inbound) noteHeld(ctx context.Context, r *Report) error {
	h := &in.held
	h.mu.Lock()
	defer h.mu.Unlock()
	now := in.cfg.Now()
	key := strings.ToLower(r.From)
	b := h.bySender[key]
	if b == nil || !now.Before(b.Until) {
		b = &heldBatch{Sender: r.From, Until: r.heldUntil}
		h.bySender[key] = b
	}
	if b.Sent {
		return nil
	}
	if r.MessageID != "" && slices.ContainsFunc(b.Items, func(it heldItem) bool { return it.MessageID == r.MessageID }) {
		return in.storeBatch(ctx, b) // noted before; its store may have failed
	}
	b.Last = now
	if len(b.Items) < maxHeldListed {
		b.Items = append(b.Items, heldItem{MessageID: r.MessageID, Subject: r.Subject, Line: heldLine(r), References: r.msg.References})
	} else {
		b.More++
	}
	return in.storeBatch(ctx, b)
}

// storeBatch writes b to the Notices table (nothing without one).
func (in *Inbound) storeBatch(ctx context.Context, b *heldBatch) error {
	if in.cfg.Notices == nil {
		return nil
	}
	v, _ := json.Marshal(b)
	if _, err := in.cfg.Notices.Put(ctx, noticeKey(b.Sender), v); err != nil {
		return fmt.Errorf("inbound: store held notice: %w", err)
	}
	return nil
}

// loadHeld reads the stored batches (after a restart) into memory, once.
func (in *Inbound) loadHeld(ctx context.Context) error {
	h := &in.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.loaded || in.cfg.Notices == nil {
		h.loaded = true
		return nil
	}
	keys, err := in.cfg.Notices.Keys(ctx)
	if err != nil {
		return fmt.Errorf("inbound: held notices: %w", err)
	}
	for _, k := range keys {
		v, _, err := in.cfg.Notices.Get(ctx, k)
		var b heldBatch
		if err != nil || json.Unmarshal(v, &b) != nil || b.Sender == "" {
			continue
		}
		if cur := h.bySender[strings.ToLower(b.Sender)]; cur == nil || cur.Until.Before(b.Until) {
			h.bySender[strings.ToLower(b.Sender)] = &b
		}
	}
	h.loaded = true
	return nil
}

// heldLine names a held message: its subject and the first words of the instruction.
func heldLine(r *Report) string {
	first, _, _ := strings.Cut(strings.TrimSpace(r.Instruction), "\n")
	if len(first) > 60 {
		first = first[:57] + "..."
	}
	switch {
	case r.Subject == "":
		return first
	case first == "":
		return r.Subject
	}
	return r.Subject + " — " + first
}

// Run sends the held notices: a sender's notice goes out once none of their messages was held
// for Config.HeldNoticeAfter; notices stored before a restart are sent too; on shutdown, every
// pending notice goes out at once. It also sends the still-on-it notes (NoteWaits) every
// quarter of Config.WaitNoteAfter. It returns nil when ctx ends.
func (in *Inbound) Run(ctx context.Context) error {
	tick := time.NewTicker(max(in.cfg.HeldNoticeAfter/4, 50*time.Millisecond))
	defer tick.Stop()
	waits := make(<-chan time.Time) // never, without wait notes
	if in.cfg.WaitNoteAfter > 0 && in.cfg.Jobs != nil {
		t := time.NewTicker(max(in.cfg.WaitNoteAfter/4, 50*time.Millisecond))
		defer t.Stop()
		waits = t.C
	}
	for {
		select {
		case <-ctx.Done():
			in.sendHeldNotices(context.WithoutCancel(ctx), true)
			return nil
		case <-tick.C:
			in.sendHeldNotices(ctx, false)
		case <-waits:
			if _, err := in.NoteWaits(ctx); err != nil {
				in.cfg.Logger.WarnContext(ctx, "still-on-it notes; will retry", slog.Any("err", err))
			}
		}
	}
}

// sendHeldNotices sends the notices that are due (all: every pending one); one that fails is
// tried again at the next call.
func (in *Inbound) sendHeldNotices(ctx context.Context, all bool) {
	if err := in.loadHeld(ctx); err != nil {
		in.cfg.Logger.ErrorContext(ctx, "load held notices; will retry", slog.Any("err", err))
		return
	}
	for _, b := range in.dueHeld(ctx, all) {
		err := in.sendHeldNotice(ctx, b)
		in.held.mu.Lock()
		if err == nil {
			err = in.storeBatch(ctx, b) // marked sent: not sent again after a restart
		}
		if err != nil {
			in.cfg.Logger.ErrorContext(ctx, "held notice; will retry", slog.String("to", b.Sender), slog.Any("err", err))
			b.Sent = false
		}
		in.held.mu.Unlock()
	}
}

// dueHeld marks the due batches sent and returns them; it forgets batches whose window ended.
func (in *Inbound) dueHeld(ctx context.Context, all bool) []*heldBatch {
	h := &in.held
	h.mu.Lock()
	defer h.mu.Unlock()
	now := in.cfg.Now()
	var due []*heldBatch
	for key, b := range h.bySender {
		switch {
		case !b.Sent && len(b.Items) > 0 && (all || now.Sub(b.Last) >= in.cfg.HeldNoticeAfter):
			b.Sent = true
			due = append(due, b)
		case b.Sent && !now.Before(b.Until):
			if in.cfg.Notices != nil {
				if err := in.cfg.Notices.Delete(ctx, noticeKey(b.Sender)); err != nil && !errors.Is(err, context.Canceled) {
					continue // forgotten at a later pass
				}
			}
			delete(h.bySender, key)
		}
	}
	return due
}

// sendHeldNotice tells the sender which of their messages are held; its Message-ID is stable
// per sender and window, so the outbox sends it once.
func (in *Inbound) sendHeldNotice(ctx context.Context, b *heldBatch) error {
	if in.cfg.Outbox == nil {
		return nil
	}
	in.held.mu.Lock()
	items, more := slices.Clone(b.Items), b.More
	in.held.mu.Unlock()
	lines := make([]string, 0, len(items)+1)
	for _, it := range items {
		lines = append(lines, it.Line)
	}
	if more > 0 {
		lines = append(lines, fmt.Sprintf("… and %d more", more))
	}
	sum := sha256.Sum256([]byte(strings.ToLower(b.Sender) + "\x00" + b.Until.UTC().Format(time.RFC3339Nano)))
	first := items[0]
	rep := outbox.Reply{Kind: outbox.Held, To: mail.Address{Address: b.Sender},
		From:    mail.Address{Name: "webordinary", Address: in.Address()},
		Subject: first.Subject, InReplyTo: first.MessageID, References: first.References,
		MessageID:    "wo-held-" + hex.EncodeToString(sum[:10]) + "@" + in.cfg.Domains[0],
		HeldMessages: lines, HeldUntil: b.Until}
	in.cfg.Logger.WarnContext(ctx, "operator attention: mail held over a limit; release or drop it (dashboard /held, webordinary mail held)",
		slog.String("from", b.Sender), slog.Int("held", len(items)+more), slog.Time("until", b.Until))
	return in.send(ctx, rep)
}
