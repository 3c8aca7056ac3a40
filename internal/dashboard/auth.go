package dashboard

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// sessionCookie carries a digest of Config.Token after a ?token= visit.
const sessionCookie = "webordinary_dashboard"

// csrfField and csrfHeader carry the per-process CSRF token of a POST.
const (
	csrfField  = "csrf"
	csrfHeader = "X-CSRF-Token"
)

// contentPolicy allows only this origin's script, style and connections.
const contentPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// secure wraps every route: security headers, then the access check, then cross-origin
// protection for POSTs (the CSRF token is checked by each action on top).
func (d *Dashboard) secure(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	next = cop.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		if d.admit(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// Guard puts h (the JSON API, /metrics) behind the dashboard's checks: a Host named by
// Config.Hosts or loopback, cross-origin protection for state-changing methods, and the token
// (Config.Token, or loopback names only when there is none).
func (d *Dashboard) Guard(h http.Handler) http.Handler {
	h = http.NewCrossOriginProtection().Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.admit(w, r) {
			h.ServeHTTP(w, r)
		}
	})
}

// GuardHost checks only the Host (for /healthz, which load balancers call without a token).
func (d *Dashboard) GuardHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.admitHost(w, r) {
			h.ServeHTTP(w, r)
		}
	})
}

// admit reports whether r may proceed; when not, it has answered.
func (d *Dashboard) admit(w http.ResponseWriter, r *http.Request) bool {
	if !d.admitHost(w, r) {
		return false
	}
	if d.cfg.Token == "" {
		return d.admitLoopback(w, r)
	}
	if q := r.URL.Query().Get("token"); q != "" && equal(q, d.cfg.Token) {
		return d.startSession(w, r)
	}
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && equal(bearer, d.cfg.Token) {
		return true
	}
	if c, err := r.Cookie(sessionCookie); err == nil && equal(c.Value, d.session()) {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="webordinary"`)
	http.Error(w, "this needs the access token: open the dashboard once with ?token=<token> "+
		"(serve printed it on its first start and keeps it in <data>/secrets/api-token), "+
		"or send Authorization: Bearer <token>", http.StatusUnauthorized)
	return false
}

// admitHost refuses a Host that is neither a loopback name nor one of Config.Hosts: a page of
// another site whose name is rebound to this address (DNS rebinding) names its own host.
func (d *Dashboard) admitHost(w http.ResponseWriter, r *http.Request) bool {
	if loopbackHost(r.Host) || d.knownHost(r.Host) {
		return true
	}
	http.Error(w, "unknown host name "+strconv.Quote(r.Host)+": this server answers only to localhost "+
		"and its public URL's host (serve.public_url)", http.StatusForbidden)
	return false
}

func (d *Dashboard) knownHost(hostport string) bool {
	host := hostName(hostport)
	for _, h := range d.cfg.Hosts {
		if host != "" && host == hostName(h) {
			return true
		}
	}
	return false
}

// startSession sets the session cookie; a GET is redirected to the same URL without the
// token, so it does not stay in the address bar or the history.
func (d *Dashboard) startSession(w http.ResponseWriter, r *http.Request) bool {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: d.session(), Path: "/",
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return true
	}
	u := *r.URL
	q := u.Query()
	q.Del("token")
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
	return false
}

// session is the cookie value: a digest of the token, so the cookie is not the token itself.
func (d *Dashboard) session() string {
	sum := sha256.Sum256([]byte("webordinary dashboard session\x00" + d.cfg.Token))
	return hex.EncodeToString(sum[:])
}

// admitLoopback serves only loopback Host names when there is no token: a page of another
// site that rebinds its name to 127.0.0.1 must not read the dashboard.
func (d *Dashboard) admitLoopback(w http.ResponseWriter, r *http.Request) bool {
	if loopbackHost(r.Host) {
		return true
	}
	http.Error(w, "this dashboard has no access token, so it answers only on localhost; "+
		"set a token to serve it under another name", http.StatusForbidden)
	return false
}

func loopbackHost(hostport string) bool {
	host := hostName(hostport)
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkCSRF reports whether r carries this process's CSRF token, and whether it came as a
// header (a script's fetch, answered with 204 rather than a redirect).
func (d *Dashboard) checkCSRF(r *http.Request) (ok, fetch bool) {
	if h := r.Header.Get(csrfHeader); h != "" {
		return equal(h, d.csrf), true
	}
	return equal(r.PostFormValue(csrfField), d.csrf), false
}

// hostName is the lower-case name or address of a Host header, without port or final dot.
func hostName(hostport string) string {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]")
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// localPath returns p when it is a path on this site, else fallback: redirects never leave.
func localPath(p, fallback string) string {
	u, err := url.Parse(p)
	if err != nil || p == "" || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(p, "/") ||
		strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\r\n") {
		return fallback
	}
	return p
}
