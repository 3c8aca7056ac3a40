package sandbox_test

import (
	"os/exec"
	"testing"

	"github.com/webordinary/webordinary/internal/sandbox"
)

// BenchmarkStart is the cost of starting a job process, /bin/true under the reaper's
// supervisor as the platform does, with and without the sandbox. The difference is what the
// sandbox adds per agent, install or build start. Report p50 with -count and benchstat, e.g.
//
//	go test ./internal/sandbox -run '^$' -bench Start -benchtime 100x -count 5
func BenchmarkStart(b *testing.B) {
	s := required(b)
	tn := newTenant(b, s)
	for _, c := range []struct {
		name string
		jail *sandbox.Jail
	}{{"unsandboxed", nil}, {"bwrap", s.Jail(tn.spec())}} {
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
			}
		})
	}
}
