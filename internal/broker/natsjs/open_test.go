package natsjs_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs"
)

// TestOpenByURL: embedded:// starts an engine others join through nats:// with its
// credentials; Close releases it (the directory can be opened again).
func TestOpenByURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natsjs.EmbeddedURL(filepath.Join(t.TempDir(), "nats"))
	creds := broker.Options{User: "u", Password: "p", NoSync: true}
	opts := creds
	opts.Listen = "127.0.0.1:0"
	emb, err := broker.Open(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(emb.Endpoint, "nats://127.0.0.1:") {
		t.Fatalf("Endpoint %q", emb.Endpoint)
	}
	ext, err := broker.Open(ctx, emb.Endpoint, creds)
	if err != nil {
		t.Fatal(err)
	}
	put, err := ext.Table(ctx, "open_test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	get, err := emb.Table(ctx, "open_test")
	if err != nil {
		t.Fatal(err)
	}
	if v, _, err := get.Get(ctx, "k"); err != nil || string(v) != "v" {
		t.Fatalf("the record written through nats:// read in-process: %q, %v", v, err)
	}
	if _, err := broker.Open(ctx, emb.Endpoint, broker.Options{}); err == nil {
		t.Error("joined without credentials")
	}
	for _, b := range []*broker.Backend{ext, emb} {
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	again, err := broker.Open(ctx, url, creds)
	if err != nil {
		t.Fatalf("reopen after Close: %v", err)
	}
	_ = again.Close()
}

func TestOpenRefusesBadURLs(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"embedded://relative/dir", "embedded:///abs?listen=x", "nats-ish", "carrier-pigeon://x"} {
		if b, err := broker.Open(context.Background(), url, broker.Options{}); err == nil {
			_ = b.Close()
			t.Errorf("Open(%q) succeeded", url)
		}
	}
	if _, err := broker.Open(context.Background(), "carrier-pigeon://x", broker.Options{}); !errors.Is(err, broker.ErrUnknownScheme) {
		t.Errorf("unknown scheme: %v", err)
	}
}
