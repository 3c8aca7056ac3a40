package pipeline_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/failure"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/project"
)

// TestFailureKindsAreTypedWhereKnown: each stage's failure carries its kind in the error the
// worker turns into the job's result, whatever the error's text says; nothing reads the text.
// (Limit, Setup, Model and Budget have tests of their own: limits_test, setup_test,
// modelretry_test, egress_test.)
func TestFailureKindsAreTypedWhereKnown(t *testing.T) {
	t.Parallel()
	broken := map[string]string{
		"package.json": `{"name":"s","version":"1.0.0","scripts":{"build":"sh build.sh"}}`,
		"build.sh":     "if [ -e broken ]; then echo 'it says nothing of what failed'; exit 1; fi\nmkdir -p dist && cp index.html dist/\n",
		"index.html":   "<h1>Hello</h1>\n",
	}
	cases := []struct {
		name  string
		files map[string]string
		proj  func(*project.Project)
		setup func(t *testing.T, f *fixture)
		job   func(*jobspec.Spec)
		want  failure.Kind
	}{
		{name: "build", files: broken, proj: func(p *project.Project) { p.RepairTurns = -1 },
			job: func(s *jobspec.Spec) { s.Instruction = "write broken: oops" }, want: failure.Build},
		{name: "agent", proj: func(p *project.Project) {
			p.Agent = project.AgentSpec{Kind: "command", Command: "echo 'the build went wrong' >&2; exit 1"}
		}, want: failure.Agent},
		{name: "timeout", proj: func(p *project.Project) {
			p.Agent = project.AgentSpec{Kind: "command", Command: "sleep 30", WallClock: 300 * time.Millisecond}
		}, want: failure.Timeout},
		{name: "site", setup: func(t *testing.T, f *fixture) {
			if err := os.RemoveAll(f.origin); err != nil {
				t.Fatal(err)
			}
		}, want: failure.Site},
		{name: "save", setup: func(t *testing.T, f *fixture) {
			hook := filepath.Join(f.origin, "hooks", "pre-receive")
			if err := os.WriteFile(hook, []byte("#!/bin/sh\necho 'the agent build' >&2\nexit 1\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, want: failure.Save},
		{name: "size", proj: func(p *project.Project) { p.MaxAttachmentBytes = 4 }, job: func(s *jobspec.Spec) {
			s.Attachments = []jobspec.Attachment{{Name: "photo.jpg", Data: []byte("too many bytes")}}
		}, want: failure.Size},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, cmpOr(c.files, site), c.proj)
			if c.setup != nil {
				c.setup(t, f)
			}
			tk := task("t1", "replace Hello with Hi in index.html")
			if c.job != nil {
				ask(&tk, c.job)
			}
			_, err := f.run(tk)
			if err == nil {
				t.Fatal("the job did not fail")
			}
			if got := failure.Of(err); got != c.want {
				t.Fatalf("failure.Of(%q) = %q, want %q", err, got, c.want)
			}
		})
	}
}

func cmpOr(files, def map[string]string) map[string]string {
	if files != nil {
		return files
	}
	return def
}
