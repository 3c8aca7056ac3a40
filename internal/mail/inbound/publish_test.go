package inbound

import (
	"testing"

	"github.com/webordinary/webordinary/internal/jobspec"
)

func TestActionOf(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"publish":                          jobspec.ActionPublish,
		"Publish!":                         jobspec.ActionPublish,
		"go live":                          jobspec.ActionPublish,
		"Looks good, publish it":           jobspec.ActionPublish,
		"looks good, publish it.":          jobspec.ActionPublish,
		"Great, thanks! Please publish.":   jobspec.ActionPublish,
		"Perfect. Go live please":          jobspec.ActionPublish,
		"ship it":                          jobspec.ActionPublish,
		"undo":                             jobspec.ActionUndo,
		"Undo the last publish please":     jobspec.ActionUndo,
		"revert that":                      jobspec.ActionUndo,
		"publish the new prices page":      jobspec.ActionEdit,
		"make the header green":            jobspec.ActionEdit,
		"undo the green header, make blue": jobspec.ActionEdit,
		"don't publish yet":                jobspec.ActionEdit,
		"":                                 jobspec.ActionEdit,
	}
	for in, want := range tests {
		if got := actionOf(in); got != want {
			t.Errorf("actionOf(%q) = %q, want %q", in, got, want)
		}
	}
}
