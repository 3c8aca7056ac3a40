package main

import (
	"testing"

	"github.com/webordinary/webordinary/internal/app"
)

// TestWorkerKeysListenOnNothing: a worker reads the same keys as serve, but the defaults of
// serve's listeners are empty for it, so a worker with nothing but an engine URL is valid.
func TestWorkerKeysListenOnNothing(t *testing.T) {
	t.Parallel()
	fs := newFlags("worker", "")
	p := newProcConfig(app.RoleWorker, fs)
	if err := fs.Parse([]string{"--engine", "nats://127.0.0.1:4222", "--data", t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Apply(func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	c := p.cfg
	if c.EngineListen != "" || c.HTTPAddr != "" || c.PreviewAddr != "" || c.Mail.SMTPAddr != "" || c.Worker.Count != app.DefaultWorkerWorkers {
		t.Fatalf("worker defaults: listen %q http %q preview %q smtp %q count %d", c.EngineListen, c.HTTPAddr, c.PreviewAddr, c.Mail.SMTPAddr, c.Worker.Count)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("a worker's default config: %v", p.explain(err))
	}
}
