package sandbox_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNpmInstalledProgramSeesItsPackages: a program installed by npm outside the toolchain
// (node_modules/.bin/tool, a link into its package) runs in the jail with its package and the
// packages beside it visible: Codex's launcher runs a native binary from an optional
// dependency, @openai/codex-linux-x64, next to its own package.
func TestNpmInstalledProgramSeesItsPackages(t *testing.T) {
	t.Parallel()
	s := required(t)
	tn := newTenant(t, s)
	modules := filepath.Join(tn.root, "clis", "node_modules")
	files := map[string]string{
		"tool/bin/tool.sh":          "#!/bin/sh\nexec cat \"$(dirname \"$(readlink -f \"$0\")\")/../../tool-linux-x64/native.txt\"\n",
		"tool-linux-x64/native.txt": "native binary here\n",
	}
	for name, content := range files {
		p := filepath.Join(modules, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(modules, ".bin", "tool")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../tool/bin/tool.sh", bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Dir, cmd.Env = tn.ws, []string{"PATH=/usr/bin:/bin"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	p, err := s.Jail(tn.spec()).Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); err != nil || code != 0 || !strings.Contains(out.String(), "native binary here") {
		t.Fatalf("exit %d (%v): %s", code, err, out.String())
	}
}
