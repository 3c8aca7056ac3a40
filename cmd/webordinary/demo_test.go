package main

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/capability"
	"github.com/webordinary/webordinary/internal/preview"
)

// TestDemoQuickStart runs the README's first command on a clean data directory: the sample
// email goes through SMTP, the job runs, and the reply and the preview exist.
func TestDemoQuickStart(t *testing.T) {
	t.Parallel()
	c := &cluster{t: t, dir: reachableTempDir(t)}
	data := filepath.Join(c.dir, "demo-data")
	out := c.cli(t, "demo", "--data", data, "--http", "127.0.0.1:0", "--preview", "127.0.0.1:0", "--smtp", "127.0.0.1:0", "--agent", "demo", "--exit")
	if !strings.Contains(out, "result: done") || !strings.Contains(out, "DEMO agent (literal edits, not AI") {
		t.Fatalf("demo output:\n%s", out)
	}
	// Running it again on the same data follows the new email's job, not the first one.
	again := c.cli(t, "demo", "--data", data, "--http", "127.0.0.1:0", "--preview", "127.0.0.1:0", "--smtp", "127.0.0.1:0", "--agent", "demo", "--exit")
	if first, second := between(out, "demo: job ", " "), between(again, "demo: job ", " "); first == "" || first == second {
		t.Fatalf("second demo followed job %q, the first ran %q:\n%s", second, first, again)
	}
	reply := between(out, "threaded reply to "+demoSender+": ", " (")
	raw, err := os.ReadFile(reply)
	if err != nil || !strings.Contains(string(raw), "In-Reply-To:") {
		t.Fatalf("reply %q: %v\n%s", reply, err, out)
	}
	// demo --exit has stopped its preview server; serve the same previews directory again.
	h, err := preview.NewServer(preview.ServerConfig{Root: filepath.Join(data, "previews")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	host, _, _ := strings.Cut(between(out, "preview: http://", "/\n"), ":")
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	if body := fetchPreview(t, host+":"+port); !strings.Contains(body, "Fresh bread every morning") {
		t.Fatalf("preview %s serves:\n%s", host, body)
	}
}

// TestDemoDefaultDataAsRootInAClosedDirectory runs the demo with its default --data, as root
// from a directory the sandboxed jobs' user cannot enter (as /root is): it must still work.
func TestDemoDefaultDataAsRootInAClosedDirectory(t *testing.T) {
	t.Parallel()
	capability.Need(t, capability.Root)
	closed, tmp := t.TempDir(), reachableTempDir(t)
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "demo", "--http", "127.0.0.1:0", "--preview", "127.0.0.1:0", "--smtp", "127.0.0.1:0", "--agent", "demo", "--exit")
	cmd.Dir = closed
	cmd.Env = append(os.Environ(), "WO_TEST_AS_MAIN=1", "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "result: done") {
		t.Fatalf("demo from %s: %v\n%s", closed, err, out)
	}
	if want := "starting webordinary in " + filepath.Join(tmp, "webordinary-demo"); !strings.Contains(string(out), want) {
		t.Errorf("demo output lacks %q:\n%s", want, out)
	}
}
