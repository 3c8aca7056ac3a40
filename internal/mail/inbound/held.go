package inbound

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
// notice Run sends them.
type heldNotices struct {
	mu       sync.Mutex
	bySender map[string]*heldBatch
}

// heldBatch is one sender's held messages in one window.
type heldBatch struct {
	sender string
	until  time.Time // the window's end: later messages open a new batch
	last   time.Time // when the last one was held
	items  []heldItem
	sent   bool
}

// heldItem is one held message as the notice names it.
type heldItem struct {
	messageID, subject, line string
	references               []string
}

// noteHeld adds a held message to its sender's batch. After the window's notice went out,
// the sender has been told that more will be held, so the message is not noted again.
func (in *Inbound) noteHeld(r *Report) {
	h := &in.held
	h.mu.Lock()
	defer h.mu.Unlock()
	now := in.cfg.Now()
	key := strings.ToLower(r.From)
	b := h.bySender[key]
	if b == nil || !now.Before(b.until) {
		b = &heldBatch{sender: r.From, until: r.heldUntil}
		h.bySender[key] = b
	}
	if b.sent || slices.ContainsFunc(b.items, func(it heldItem) bool { return it.messageID == r.MessageID && r.MessageID != "" }) {
		return
	}
	b.last = now
	b.items = append(b.items, heldItem{messageID: r.MessageID, subject: r.Subject, line: heldLine(r),
		references: r.msg.References})
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
// for Config.HeldNoticeAfter; on shutdown, every pending notice goes out at once. It returns
// nil when ctx ends.
func (in *Inbound) Run(ctx context.Context) error {
	tick := time.NewTicker(max(in.cfg.HeldNoticeAfter/4, 50*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			in.sendHeldNotices(context.WithoutCancel(ctx), true)
			return nil
		case <-tick.C:
			in.sendHeldNotices(ctx, false)
		}
	}
}

// sendHeldNotices sends the notices that are due (all: every pending one); one that fails is
// tried again at the next call.
func (in *Inbound) sendHeldNotices(ctx context.Context, all bool) {
	for _, b := range in.dueHeld(all) {
		err := in.sendHeldNotice(ctx, b)
		if err != nil {
			in.cfg.Logger.ErrorContext(ctx, "held notice; will retry", slog.String("to", b.sender), slog.Any("err", err))
			in.held.mu.Lock()
			b.sent = false
			in.held.mu.Unlock()
		}
	}
}

// dueHeld marks the due batches sent and returns them; it forgets batches whose window ended.
func (in *Inbound) dueHeld(all bool) []*heldBatch {
	h := &in.held
	h.mu.Lock()
	defer h.mu.Unlock()
	now := in.cfg.Now()
	var due []*heldBatch
	for key, b := range h.bySender {
		switch {
		case !b.sent && len(b.items) > 0 && (all || now.Sub(b.last) >= in.cfg.HeldNoticeAfter):
			b.sent = true
			due = append(due, b)
		case b.sent && !now.Before(b.until):
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
	items := slices.Clone(b.items)
	in.held.mu.Unlock()
	lines := make([]string, 0, min(len(items), maxHeldListed)+1)
	for _, it := range items[:min(len(items), maxHeldListed)] {
		lines = append(lines, it.line)
	}
	if len(items) > maxHeldListed {
		lines = append(lines, fmt.Sprintf("… and %d more", len(items)-maxHeldListed))
	}
	sum := sha256.Sum256([]byte(strings.ToLower(b.sender) + "\x00" + b.until.UTC().Format(time.RFC3339Nano)))
	first := items[0]
	rep := outbox.Reply{Kind: outbox.Held, To: mail.Address{Address: b.sender},
		From:    mail.Address{Name: "webordinary", Address: in.Address()},
		Subject: first.subject, InReplyTo: first.messageID, References: first.references,
		MessageID:    "wo-held-" + hex.EncodeToString(sum[:10]) + "@" + in.cfg.Domains[0],
		HeldMessages: lines, HeldUntil: b.until}
	in.cfg.Logger.WarnContext(ctx, "operator attention: mail held over a limit; release or drop it (dashboard /held, webordinary mail held)",
		slog.String("from", b.sender), slog.Int("held", len(items)), slog.Time("until", b.until))
	return in.send(ctx, rep)
}
