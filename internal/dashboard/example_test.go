package dashboard_test

import (
	"log"
	"log/slog"
	"net/http"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/dashboard"
	"github.com/webordinary/webordinary/internal/live"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/worker"
)

// Example mounts the dashboard at "/" next to the JSON API, as serve does.
func Example() {
	var (
		backend *broker.Backend // the engine's ports
		r       *router.Router
		pool    *worker.Pool
		hub     = live.NewHub(0) // the pipeline writes agent output here
		apiMux  http.Handler     // the JSON API: /api/ and /healthz
	)
	d, err := dashboard.New(dashboard.Config{Backend: backend, Router: r, Live: hub, Local: pool.Status,
		Token:  "", // set when listening beyond loopback
		Logger: slog.Default()})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", apiMux)
	mux.Handle("/healthz", apiMux)
	mux.Handle("/", d.Handler())
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mux))
}
