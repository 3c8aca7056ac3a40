package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readmeMailSend is the `mail send` command docs/MAIL.md gives for trying mail on your machine.
func readmeMailSend(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile("../../docs/MAIL.md")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(readme)) {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "webordinary mail send --from ") {
			return l
		}
	}
	t.Fatal("docs/MAIL.md has no `webordinary mail send --from …` line")
	return ""
}

// readmeShell runs command with sh, as a reader would: webordinary on PATH (this test binary),
// the default data directory under xdg, and serve's addresses in the flags' variables (the
// defaults' ports may be taken on a test machine).
func readmeShell(t *testing.T, dir, xdg, command string, env ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	_ = os.MkdirAll(bin, 0o755)
	_ = os.Symlink(os.Args[0], filepath.Join(bin, "webordinary"))
	cmd := exec.Command("sh", "-c", command)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "WO_") || strings.HasPrefix(e, "XDG_DATA_HOME=") })
	cmd.Env = append(append(cmd.Env, "WO_TEST_AS_MAIN=1", "XDG_DATA_HOME="+xdg, "PATH="+bin+":"+os.Getenv("PATH")), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestReadmeMailSend: docs/MAIL.md's `mail send` line, run as written on serve's machine with serve
// on its default data directory, gets the instruction run by email; without serve's key it
// says where it looked.
func TestReadmeMailSend(t *testing.T) {
	t.Parallel()
	line := readmeMailSend(t)
	dir := reachableTempDir(t)
	xdg := filepath.Join(dir, "xdg")
	out, err := readmeShell(t, dir, filepath.Join(dir, "nothing"), line)
	if want := "no local mail testing key in " + filepath.Join(dir, "nothing", "webordinary"); err == nil || !strings.Contains(out, want) {
		t.Fatalf("%s without serve's key: %v; want it to say %q:\n%s", line, err, want, out)
	}

	c := &cluster{t: t, dir: dir}
	data := filepath.Join(xdg, "webordinary") // the default data directory with XDG_DATA_HOME=xdg
	ready := filepath.Join(dir, "ready.json")
	c.serveP = c.start("serve", "--data", data, "--http", "127.0.0.1:0", "--preview", "127.0.0.1:0", "--nats-listen", "",
		"--smtp", "127.0.0.1:0", "--ready-file", ready, "--workers", "1", "--log-level", "warn", "--set", "mail.local_testing=true")
	t.Cleanup(c.stopAll)
	c.api, _ = waitReady(t, ready)
	c.cli(t, "project", "add", "site", "--data", data, "--server", c.api, "--repo", bareSite(t, dir), "--agent", "command",
		"--agent-command", `sed -i "s|Hello|$WO_INSTRUCTION|" index.html && echo "set the heading to: $WO_INSTRUCTION"`,
		"--sender", "owner@example.com=owner")
	out, err = readmeShell(t, dir, xdg, line, "WO_SERVER="+c.api, "WO_SMTP="+readyField(t, ready, "smtp"))
	if err != nil || !strings.Contains(out, " done in ") {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
}
