package failure_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/webordinary/webordinary/internal/failure"
)

type limitErr struct{}

func (limitErr) Error() string             { return "used more than 2 GiB of memory" }
func (limitErr) FailureKind() failure.Kind { return failure.Limit }

// TestOf: the kind nearest the cause wins; text never decides.
func TestOf(t *testing.T) {
	t.Parallel()
	permanent := errors.New("permanent failure")
	cases := []struct {
		name string
		err  error
		want failure.Kind
	}{
		{"nil", nil, failure.Unknown},
		{"unmarked, whatever it says", errors.New("build: agent: push: 429 too many requests"), failure.Unknown},
		{"marked", failure.Mark(failure.Build, errors.New("exit 1")), failure.Build},
		{"wrapped after marking", fmt.Errorf("%w: %w", permanent, failure.Mark(failure.Save, errors.New("rejected"))), failure.Save},
		{"deeper wins", failure.Mark(failure.Build, fmt.Errorf("npm: %w", limitErr{})), failure.Limit},
		{"deeper mark wins", failure.Mark(failure.Agent, failure.Mark(failure.Model, errors.New("x"))), failure.Model},
		{"joined", errors.Join(errors.New("a"), failure.Mark(failure.Site, errors.New("b"))), failure.Site},
	}
	for _, c := range cases {
		if got := failure.Of(c.err); got != c.want {
			t.Errorf("%s: Of(%v) = %q, want %q", c.name, c.err, got, c.want)
		}
	}
	if failure.Mark(failure.Build, nil) != nil {
		t.Error("Mark(kind, nil) is not nil")
	}
	if e := failure.Mark(failure.Build, permanent); !errors.Is(e, permanent) || e.Error() != permanent.Error() {
		t.Errorf("Mark changed the error: %v", e)
	}
}
