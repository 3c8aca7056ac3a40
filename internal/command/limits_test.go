package command_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/command"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/tenant"
	"github.com/webordinary/webordinary/internal/worker"
)

// A command that fills its workspace past the disk limit fails for that reason, for good.
func TestCommandOverItsLimitFailsForGood(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "ws")
	for _, d := range []string{filepath.Dir(filepath.Dir(root)), filepath.Dir(root)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sb, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeRequired, Roots: []string{root}, Limits: sandbox.Limits{Disk: 4 << 20}})
	if err != nil {
		t.Skipf("SKIPPED: no sandbox here: %v", err)
	}
	p, err := command.New(command.Config{Command: "for i in 1 2 3; do head -c 2M /dev/zero > f$i; done", Root: root, Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	tn, _ := tenant.New("site", "alice")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = p.Process(ctx, worker.Task{Job: jobspec.Spec{Instruction: "x"}.On(broker.Job{ID: broker.NewJobID(), Tenant: tn}), Attempt: 1})
	if !errors.Is(err, worker.ErrPermanent) || !errors.Is(err, sandbox.ErrLimit) || !strings.Contains(err.Error(), "disk=4MiB") {
		t.Fatalf("6 MiB under disk=4MiB: %v", err)
	}
}
