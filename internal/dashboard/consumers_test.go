package dashboard_test

import (
	"net/http"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// TestPagesLeaveNoConsumers: the dashboard's pages are polled and reloaded (the overview's
// feed reads the status twice a second; /dead reads the recent jobs and each tenant's dead
// letters), so a read must leave nothing behind on the engine. 3,000 page loads, then a
// job still runs end to end.
func TestPagesLeaveNoConsumers(t *testing.T) {
	t.Parallel()
	f := setup(t, options{maxAttempts: 1})
	tn, _ := tenant.New("site", "bob")
	dead := f.submit("bob", "fail")
	f.waitState(dead.Job.ID, broker.StateDead)
	waitDeadLetter(t, f, tn, dead.Job.ID)
	before := consumers(t, f.env.Server)
	const loads, chunk, slack = 3000, 300, 10
	pages := []string{"/", "/dead", "/jobs/" + dead.Job.ID}
	for done := 0; done < loads; done += chunk {
		for i := range chunk {
			if res, body := f.get(pages[i%len(pages)]); res.StatusCode != http.StatusOK {
				t.Fatalf("GET %s after %d loads: %s\n%s", pages[i%len(pages)], done+i, res.Status, body)
			}
		}
		if after := consumers(t, f.env.Server); after > before+slack {
			t.Fatalf("the engine holds %d consumers after %d page loads, %d before", after, done+chunk, before)
		}
	}
	f.waitState(f.submit("bob", "green header").Job.ID, broker.StateDone)
}

// consumers counts the consumers on every stream of the engine.
func consumers(t *testing.T, s *server.Server) int {
	t.Helper()
	info, err := s.Jsz(&server.JSzOptions{})
	if err != nil {
		t.Fatalf("jsz: %v", err)
	}
	return info.Consumers
}
