package agentstate_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/agentstate"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
)

// BenchmarkSaveRestore saves a tenant's state holding a session transcript of the given size
// (JSON lines of prose, code and ids, like Claude Code's) to an embedded NATS engine, and
// restores it into an empty directory: what one job costs its worker and the next owner.
//
//	go test -run '^$' -bench SaveRestore -benchtime 20x ./internal/agentstate/
func BenchmarkSaveRestore(b *testing.B) {
	env := natsjstest.Start(b, natsjstest.Options{})
	s, err := agentstate.Open(b.Context(), env.Backend, 0)
	if err != nil {
		b.Fatal(err)
	}
	for _, mib := range []int{1, 8} {
		src := b.TempDir()
		writeTranscript(b, filepath.Join(src, "agent", "projects", "-work-site", "s1.jsonl"), mib<<20)
		b.Run(fmt.Sprintf("transcript=%dMiB/save", mib), func(b *testing.B) {
			var saved agentstate.Stats
			for b.Loop() {
				if saved, err = s.Save(b.Context(), ann, src); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(saved.Bytes), "archive-bytes")
		})
		b.Run(fmt.Sprintf("transcript=%dMiB/restore", mib), func(b *testing.B) {
			for b.Loop() {
				if restored, _, err := s.Restore(b.Context(), ann, b.TempDir()); err != nil || !restored {
					b.Fatal(restored, err)
				}
			}
		})
	}
}

var words = strings.Fields(`the header should be green make gallery photo attached index astro component
	import export const function return div class style color background padding margin font
	tool_use tool_result assistant user content text input file_path old_string new_string`)

func writeTranscript(b *testing.B, path string, size int) {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	var sb strings.Builder
	for sb.Len() < size {
		fmt.Fprintf(&sb, `{"type":"assistant","uuid":"%016x%016x","message":{"content":[{"type":"text","text":"`, r.Uint64(), r.Uint64())
		for range 20 + r.IntN(60) {
			sb.WriteString(words[r.IntN(len(words))] + " ")
		}
		sb.WriteString("\"}]}}\n")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
}
