package outbox_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/mail"
	"os"
	"path/filepath"
	"time"

	"github.com/webordinary/webordinary/internal/mail/outbox"
)

func ExampleCompose() {
	msg, err := outbox.Compose(outbox.Reply{
		Kind:        outbox.Done,
		To:          mail.Address{Name: "Ada", Address: "ada@example.org"},
		From:        mail.Address{Name: "webordinary", Address: "edit@example.com"},
		ReplyTo:     "edit+k3y@example.com",
		Subject:     "RE: New opening hours",
		InReplyTo:   "CAF1234@mail.example.org",
		JobID:       "j7",
		Summary:     "Updated the opening hours on the contact page.",
		PreviewURLs: []string{"https://k3y.preview.example.com/"},
	}, time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC))
	if err != nil {
		fmt.Println(err)
		return
	}
	m, _ := mail.ReadMessage(bytes.NewReader(msg))
	for _, h := range []string{"Subject", "Message-ID", "In-Reply-To", "References", "Reply-To", "Auto-Submitted"} {
		fmt.Printf("%s: %s\n", h, m.Header.Get(h))
	}
	// Output:
	// Subject: Re: New opening hours
	// Message-ID: <wo-j7-done@example.com>
	// In-Reply-To: <CAF1234@mail.example.org>
	// References: <CAF1234@mail.example.org>
	// Reply-To: "webordinary" <edit+k3y@example.com>
	// Auto-Submitted: auto-replied
}

func ExampleOutbox() {
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	ob, err := outbox.Open(outbox.Config{
		Dir:    filepath.Join(dir, "spool"),
		Sender: outbox.Dir{Path: filepath.Join(dir, "sent-mail")},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ob.Run(ctx) }()

	msg, _ := outbox.Compose(outbox.Reply{
		Kind:      outbox.Received,
		To:        mail.Address{Address: "ada@example.org"},
		From:      mail.Address{Name: "webordinary", Address: "edit@example.com"},
		Subject:   "New opening hours",
		InReplyTo: "CAF1234@mail.example.org",
		JobID:     "j7",
	}, time.Now())
	if err := ob.Enqueue(ctx, "edit@example.com", []string{"ada@example.org"}, msg); err != nil {
		fmt.Println(err)
		return
	}
	for ob.Stats().Sent == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	files, _ := os.ReadDir(filepath.Join(dir, "sent-mail"))
	fmt.Println(files[0].Name())
	// Output: wo-j7-received@example.com.eml
}
