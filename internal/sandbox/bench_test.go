package sandbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/webordinary/webordinary/internal/sandbox"
)

// BenchmarkStart is the cost of starting a job process, /bin/true under the reaper's
// supervisor as the platform does, with and without the sandbox. The difference is what the
// sandbox adds per agent, install or build start; bwrap+rlimits adds the rlimit shim (the
// default limits) to bwrap, bwrap+cgroup a control group made, entered, watched and removed
// (where one can be made; else it is bwrap+rlimits again). Report p50 with -count and
// benchstat, e.g.
//
//	go test ./internal/sandbox -run '^$' -bench Start -benchtime 100x -count 5
func BenchmarkStart(b *testing.B) {
	s, tn := limited(b)
	rl, _ := limited(b)
	sandbox.WithoutCgroups(rl)
	off := tn.spec()
	off.Limits = sandbox.Limits{Memory: sandbox.Unlimited, Procs: sandbox.Unlimited, Disk: sandbox.Unlimited}
	for _, c := range []struct {
		name string
		jail *sandbox.Jail
	}{{"unsandboxed", nil}, {"bwrap", rl.Jail(off)}, {"bwrap+rlimits", rl.Jail(tn.spec())}, {"bwrap+cgroup", s.Jail(tn.spec())}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command("/bin/true")
				cmd.Dir, cmd.Env = tn.ws, []string{"PATH=/usr/bin:/bin"}
				p, err := c.jail.Start(cmd)
				if err != nil {
					b.Fatal(err)
				}
				if code, err := p.Wait(); err != nil || code != 0 {
					b.Fatalf("exit %d: %v", code, err)
				}
				if err := c.jail.OverLimit(true, 0, ""); err != nil { // the group's removal, the disk check
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCheckDisk is the disk check after each job process, over a workspace of 20,000
// small files (a modest node_modules).
//
//	go test ./internal/sandbox -run '^$' -bench CheckDisk -benchtime 20x
func BenchmarkCheckDisk(b *testing.B) {
	s, tn := limited(b)
	for i := range 200 {
		d := filepath.Join(tn.ws, "node_modules", fmt.Sprint("pkg", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for k := range 100 {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprint(k, ".js")), []byte("module.exports = 1\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	j := s.Jail(tn.spec())
	for b.Loop() {
		if err := j.CheckDisk(); err != nil {
			b.Fatal(err)
		}
	}
}
