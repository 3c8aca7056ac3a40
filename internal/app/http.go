package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/webordinary/webordinary/internal/dashboard"
	"github.com/webordinary/webordinary/internal/metrics"
)

// routes puts every HTTP route behind the dashboard's checks: the Host must be loopback or the
// public URL's (DNS rebinding); /api/ and /metrics need the token and refuse cross-origin
// writes; /healthz needs only the Host; the dashboard's pages need the token as well.
// /publish/ (signed, single-use publish links from replies) and /t/ (the owner's signed thread
// pages) need only the Host: the link is the credential.
func routes(dash *dashboard.Dashboard, apiHandler, publish, thread http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/publish/", dash.GuardHost(publish))
	mux.Handle("/t/", dash.GuardHost(thread))
	mux.Handle("/api/", dash.Guard(apiHandler))
	mux.Handle("/healthz", dash.GuardHost(apiHandler))
	mux.Handle("/metrics", dash.Guard(promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{})))
	mux.Handle("/", dash.Handler())
	return mux
}

// allowedHosts are the non-loopback Host names the HTTP server answers to: the public URL's,
// and HTTPAddr's when it names one host (both checked by Validate).
func (c *Config) allowedHosts() []string {
	var hosts []string
	host, _, _ := net.SplitHostPort(c.HTTPAddr)
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		hosts = append(hosts, host)
	}
	if c.PublicURL != "" {
		u, _ := url.Parse(c.PublicURL)
		hosts = append(hosts, u.Hostname())
	}
	return hosts
}

// apiToken is Config.Token, else the data directory's token, generated on the first start.
// source says where it is (never the token); created reports a new one, so it is shown once.
func (a *App) apiToken() (token, source string, created bool, err error) {
	if a.cfg.Token != "" {
		return a.cfg.Token, "the configured token", false, nil
	}
	token, created, err = loadOrCreateAPIToken(a.cfg.Data)
	if err != nil {
		return "", "", false, &FieldError{Field: "Token", Value: "", Err: err}
	}
	return token, SecretPath(a.cfg.Data, APITokenFile), created, nil
}

// serveHTTP serves srv on ln until ctx ends, then shuts it down (bounded: 5s).
func serveHTTP(srv *http.Server, ln net.Listener) func(context.Context) error {
	return func(ctx context.Context) error {
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		select {
		case err := <-served:
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			return err
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			<-served
			return nil
		}
	}
}
