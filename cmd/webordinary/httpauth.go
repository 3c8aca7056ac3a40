package main

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/webordinary/webordinary/internal/dashboard"
	"github.com/webordinary/webordinary/internal/metrics"
)

// routes puts every HTTP route behind the dashboard's checks: the Host must be loopback or the
// public URL's (DNS rebinding); /api/ and /metrics need the token and refuse cross-origin
// writes; /healthz needs only the Host; the dashboard's pages need the token as well.
// /publish/ (signed, single-use publish links from replies) needs only the Host: the link is
// the credential.
func routes(dash *dashboard.Dashboard, apiHandler, publish http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/publish/", dash.GuardHost(publish))
	mux.Handle("/api/", dash.Guard(apiHandler))
	mux.Handle("/healthz", dash.GuardHost(apiHandler))
	mux.Handle("/metrics", dash.Guard(promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{})))
	mux.Handle("/", dash.Handler())
	return mux
}

// allowedHosts are the non-loopback Host names the HTTP server answers to: the public URL's,
// and the --http address when it names one host.
func allowedHosts(httpAddr, publicURL string) ([]string, error) {
	host, _, err := net.SplitHostPort(httpAddr)
	if err != nil {
		return nil, fmt.Errorf("--http %q: %w (use host:port)", httpAddr, err)
	}
	var hosts []string
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		hosts = append(hosts, host)
	}
	if publicURL != "" {
		u, err := url.Parse(publicURL)
		if err != nil || u.Hostname() == "" {
			return nil, fmt.Errorf("--public-url %q: want an absolute URL such as https://edit.example.com", publicURL)
		}
		hosts = append(hosts, u.Hostname())
	}
	return hosts, nil
}

// apiToken sets f.token from --dashboard-token or the data directory's token, generating that
// on the first start. source says where it is (never the token); created reports a new one,
// so serve shows it once.
func (f *serveFlags) apiToken() (source string, created bool, err error) {
	if f.token != "" {
		return "--dashboard-token", false, nil
	}
	f.token, created, err = loadOrCreateAPIToken(f.data)
	if err != nil {
		return "", false, fmt.Errorf("API token: %w (or set --dashboard-token)", err)
	}
	return secretPath(f.data, apiTokenFile), created, nil
}

// announceToken prints a newly generated token once, with how to use it.
func announceToken(addr, token, data string) {
	fmt.Fprintf(os.Stderr, `
  A new API and dashboard token was generated into %s (shown only now):
    %s
  Browser: open http://%s/?token=%s once (it sets a cookie).
  CLI on this machine: reads it from --data (WO_DATA); elsewhere pass --token or WO_TOKEN.

`, secretPath(data, apiTokenFile), token, addr, token)
}
