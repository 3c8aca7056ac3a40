package agenttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// fakeClaudePkg is built from the test's working directory, which go test sets to the
// package's directory inside this module.
const fakeClaudePkg = "github.com/webordinary/webordinary/internal/agent/fakeclaude"

var fake struct {
	once sync.Once
	path string
	err  error
}

// BuildFakeClaude builds fakeclaude once per test binary and returns the path of the binary,
// named "claude" (so that its directory can also be put first on PATH). Use it as
// agent.Spec{Kind: "claude", Command: path}. It fails the test if the build fails. Safe for
// concurrent use; the binary lives in a temporary directory that is left behind when the test
// binary exits.
func BuildFakeClaude(t testing.TB) string {
	t.Helper()
	fake.once.Do(func() { fake.path, fake.err = build() })
	if fake.err != nil {
		t.Fatalf("agenttest: build fakeclaude: %v", fake.err)
	}
	return fake.path
}

func build() (string, error) {
	dir, err := os.MkdirTemp("", "fakeclaude-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "claude")
	// go test puts its own toolchain's bin directory first on PATH.
	cmd := exec.Command("go", "build", "-o", out, fakeClaudePkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", fakeClaudePkg, err, b)
	}
	return out, nil
}
