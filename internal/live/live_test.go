package live_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/live"
)

func TestBacklogAndFollow(t *testing.T) {
	t.Parallel()
	h := live.NewHub(3)
	w := h.Writer("j1")
	fmt.Fprint(w, "one\ntwo\nthr")
	fmt.Fprint(w, "ee\nfour\n")
	backlog, lines, stop := h.Watch("j1")
	defer stop()
	if fmt.Sprint(backlog) != "[two three four]" {
		t.Fatalf("backlog %v", backlog)
	}
	fmt.Fprintln(w, "five")
	select {
	case l := <-lines:
		if l != "five" {
			t.Fatalf("got %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no new line")
	}
}
