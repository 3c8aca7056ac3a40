package inbound

import (
	"bytes"
	"context"
	"fmt"
	"net/mail"
	"strings"
)

// RecordSent indexes a Message-ID that a mail service gave one of our replies in place of the
// one we composed (Amazon SES replaces every Message-ID), so that an owner's reply whose
// In-Reply-To names it still finds the thread. msg is the reply as we sent it: its
// In-Reply-To and References lead to the thread. A reply that belongs to no known thread is
// not recorded (nil). Idempotent; safe for concurrent use.
func (in *Inbound) RecordSent(ctx context.Context, msg []byte, messageID string) error {
	if strings.Trim(messageID, "<> ") == "" {
		return nil
	}
	m, err := mail.ReadMessage(bytes.NewReader(msg))
	if err != nil {
		return fmt.Errorf("inbound: record sent message: %w", err)
	}
	ids := append(msgIDs(m.Header.Get("In-Reply-To")), reverse(msgIDs(m.Header.Get("References")))...)
	for _, id := range ids {
		v, _, err := in.cfg.Mail.Get(ctx, msgKey(id))
		if err != nil || len(v) == 0 {
			continue
		}
		if _, err := in.cfg.Mail.Put(ctx, msgKey(messageID), v); err != nil {
			return fmt.Errorf("inbound: record sent message %s: %w", messageID, err)
		}
		return nil
	}
	return nil
}

// msgIDs splits a header of <id> tokens into ids without brackets.
func msgIDs(h string) []string {
	var ids []string
	for _, f := range strings.Fields(h) {
		if id := strings.Trim(f, "<>,"); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}
