package inbound

import (
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
)

func TestActionOf(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"publish":                          broker.ActionPublish,
		"Publish!":                         broker.ActionPublish,
		"go live":                          broker.ActionPublish,
		"Looks good, publish it":           broker.ActionPublish,
		"looks good, publish it.":          broker.ActionPublish,
		"Great, thanks! Please publish.":   broker.ActionPublish,
		"Perfect. Go live please":          broker.ActionPublish,
		"ship it":                          broker.ActionPublish,
		"undo":                             broker.ActionUndo,
		"Undo the last publish please":     broker.ActionUndo,
		"revert that":                      broker.ActionUndo,
		"publish the new prices page":      broker.ActionEdit,
		"make the header green":            broker.ActionEdit,
		"undo the green header, make blue": broker.ActionEdit,
		"don't publish yet":                broker.ActionEdit,
		"":                                 broker.ActionEdit,
	}
	for in, want := range tests {
		if got := actionOf(in); got != want {
			t.Errorf("actionOf(%q) = %q, want %q", in, got, want)
		}
	}
}
