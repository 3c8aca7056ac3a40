package main

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// checkHTTPExposure refuses a non-loopback HTTP address without a token: the dashboard can
// interrupt jobs and the API can submit them.
func checkHTTPExposure(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http %q: %w (use host:port)", addr, err)
	}
	if isLoopbackHost(host) || token != "" {
		return nil
	}
	return fmt.Errorf("--http %s is reachable from other machines: set --dashboard-token (clients send it as Authorization: Bearer TOKEN, or open the dashboard once with ?token=TOKEN), or listen on 127.0.0.1", addr)
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// requireToken lets a request through with the token as a bearer header, a cookie, or a
// ?token= query (which sets the cookie). /healthz stays open for load balancers.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	ok := func(s string) bool { return subtle.ConstantTimeCompare([]byte(s), []byte(token)) == 1 }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		if ok(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")) {
			next.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie("wo_token"); err == nil && ok(c.Value) {
			next.ServeHTTP(w, r)
			return
		}
		if q := r.URL.Query().Get("token"); q != "" && ok(q) {
			http.SetCookie(w, &http.Cookie{Name: "wo_token", Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			next.ServeHTTP(w, r)
			return
		}
		http.Error(w, "a token is required: send Authorization: Bearer TOKEN, or open the dashboard with ?token=TOKEN", http.StatusUnauthorized)
	})
}
