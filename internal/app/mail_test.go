package app

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
	"github.com/webordinary/webordinary/internal/mail/outbox"
)

// TestReplySecretIsTheEngines: without a configured secret, every serve on one engine signs
// reply tokens with the same secret whatever its data directory; the first one stores the
// secret an older serve kept in its data directory, so the tokens that serve handed out keep
// working; a configured secret wins.
func TestReplySecretIsTheEngines(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, err := broker.Open(ctx, "mem://", broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	older := t.TempDir()
	kept := bytes.Repeat([]byte("ab"), 32)
	if err := os.WriteFile(filepath.Join(older, "mail-secret"), kept, 0o600); err != nil {
		t.Fatal(err)
	}
	first, err := loadMailSecret(ctx, b, "", older)
	if err != nil || !bytes.Equal(first, kept) {
		t.Fatalf("first serve: %q, %v; want the data directory's %q", first, err, kept)
	}
	restarted, err := loadMailSecret(ctx, b, "", t.TempDir())
	if err != nil || !bytes.Equal(restarted, kept) {
		t.Fatalf("serve on an empty data directory: %q, %v; want the engine's %q", restarted, err, kept)
	}
	if got, err := loadMailSecret(ctx, b, "configured-secret-0123", t.TempDir()); err != nil || string(got) != "configured-secret-0123" {
		t.Fatalf("configured secret: %q, %v", got, err)
	}
}

// TestAFreshReplySecretIsStoredOnce: on a new engine, two serves with empty data directories
// agree on one fresh secret.
func TestAFreshReplySecretIsStoredOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, err := broker.Open(ctx, "mem://", broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	one, err := loadMailSecret(ctx, b, "", t.TempDir())
	if err != nil || len(one) < 32 {
		t.Fatalf("fresh secret %q, %v", one, err)
	}
	two, err := loadMailSecret(ctx, b, "", t.TempDir())
	if err != nil || !bytes.Equal(one, two) {
		t.Fatalf("second serve: %q, %v; want %q", two, err, one)
	}
}

// TestRepliesOutliveServeOnASharedEngine: serve on an engine outside its process (a NATS
// server here; DynamoDB and S3 on AWS) keeps its reply outbox in that engine, not on its
// disk. A reply queued by a serve that stops before sending it is sent, once, by the next
// serve on the engine, started on an empty data directory (a new Fargate task). Serve's own
// embedded engine keeps the spool in its data directory, beside the engine's files.
func TestRepliesOutliveServeOnASharedEngine(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := natsjstest.Start(t, natsjstest.Options{Listen: true, NoSync: true})
	serve := func() (*App, *outbox.Outbox) {
		cfg := serveConfig(t)
		cfg.Engine, cfg.EngineListen = env.URL, ""
		a, err := New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := broker.Open(ctx, env.URL, broker.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		ob, err := a.openOutbox(ctx, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		return a, ob
	}
	first, ob := serve()
	msg := []byte("Message-ID: <wo-job-kept-done@example.com>\r\nFrom: edit@example.com\r\nTo: owner@example.org\r\n" +
		"Subject: Done\r\n\r\nYour change is live.\r\n")
	if err := ob.Enqueue(ctx, "edit@example.com", []string{"owner@example.org"}, msg); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(first.cfg.Data, "mail-outbox")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("serve on a shared engine spooled replies on its disk: %v", err)
	}

	second, ob := serve() // the first stopped before sending; its disk is gone with it
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ob.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	sent := filepath.Join(second.cfg.Data, "outbox", "wo-job-kept-done@example.com.eml")
	for deadline := time.Now().Add(30 * time.Second); ob.Stats().Sent == 0; {
		select {
		case err := <-done:
			t.Fatalf("the outbox stopped: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the next serve did not send the reply the first one queued")
		}
	}
	if got, err := os.ReadFile(sent); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("the next serve sent %q, %v; want the queued reply", got, err)
	}

	local := serveConfig(t)
	a, err := New(ctx, local)
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Open(ctx, "mem://", broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if _, err := a.openOutbox(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(local.Data, "mail-outbox", "queue")); err != nil {
		t.Fatalf("serve with its embedded engine: no spool in its data directory: %v", err)
	}
}
