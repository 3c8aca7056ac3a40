package egress

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
)

// Model is a model API the proxy serves to a job under /<Name>/, with the platform's credential.
type Model struct {
	// Name is the route: "anthropic" or "openai" (see AnthropicModel, OpenAIModel).
	Name string
	// Upstream is the real endpoint's origin (scheme://host[:port]); a request for
	// /<Name>/v1/messages goes to Upstream/v1/messages. It is the platform's choice, so it is
	// reached whatever its address (a gateway on the host's loopback works).
	Upstream *url.URL
	// Header carries Key upstream: "x-api-key" (Key as is) or "Authorization" (Bearer Key).
	Header string
	// Key is the real credential. Empty: the job's own credential passes through (a
	// subscription login); the route still hides the endpoint's address from the policy.
	Key string
	// Path is the real base URL's path ("/v1" for OpenAI's), kept in the job's base URL so
	// that paths map one to one.
	Path string
}

// ModelFromEnv is api's route ("anthropic" or "openai") at base ("": the vendor's), with the
// key the platform holds in its environment (ANTHROPIC_API_KEY, OPENAI_API_KEY; none: the
// job's own credential passes through).
func ModelFromEnv(api, base string) (Model, error) {
	if api == "openai" {
		return OpenAIModel(base, os.Getenv("OPENAI_API_KEY"))
	}
	return AnthropicModel(base, os.Getenv("ANTHROPIC_API_KEY"))
}

// AnthropicModel is the Anthropic Messages API at base (default https://api.anthropic.com)
// with key.
func AnthropicModel(base, key string) (Model, error) {
	return model("anthropic", base, "https://api.anthropic.com", "x-api-key", key)
}

// OpenAIModel is the OpenAI API at base (default https://api.openai.com/v1) with key.
func OpenAIModel(base, key string) (Model, error) {
	return model("openai", base, "https://api.openai.com/v1", "Authorization", key)
}

func model(name, base, def, header, key string) (Model, error) {
	if base == "" {
		base = def
	}
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return Model{}, &url.Error{Op: "egress model base", URL: base, Err: err}
	}
	return Model{Name: name, Upstream: &url.URL{Scheme: u.Scheme, Host: u.Host}, Header: header, Key: key,
		Path: strings.TrimSuffix(u.Path, "/")}, nil
}

// BaseURL is what the job's agent uses in place of the named route's real base URL: the same
// path under the route, on the proxy's address inside the jail. "" when the session has no
// such route.
func (s *Session) BaseURL(name string) string {
	m, ok := s.route(name)
	if !ok {
		return ""
	}
	return "http://127.0.0.1:" + strconv.Itoa(s.p.cfg.Port) + "/" + m.Name + m.Path
}

// agentVars are the variables an agent reads each route's base URL and key from.
var agentVars = map[string][2]string{"anthropic": {"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"},
	"openai": {"OPENAI_BASE_URL", "OPENAI_API_KEY"}}

// AgentEnv points an agent at the session's model routes: each route's base URL variable
// (ANTHROPIC_BASE_URL, OPENAI_BASE_URL) and, where the platform holds the key, the key
// variable set to the session's token. Append it after the platform's variables so it wins.
func (s *Session) AgentEnv() []string {
	var env []string
	for _, m := range s.policy.Models {
		v, ok := agentVars[m.Name]
		if !ok || m.Upstream == nil {
			continue
		}
		env = append(env, v[0]+"="+s.BaseURL(m.Name))
		if m.Key != "" {
			env = append(env, v[1]+"="+s.Token)
		}
	}
	return env
}

// model serves a model route: the job's token is swapped for the real key.
func (s *Session) model(w http.ResponseWriter, r *http.Request) {
	name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	m, ok := s.route(name)
	if !ok {
		s.deny(r.Host+r.URL.Path, "no such model route")
		http.Error(w, "egress: no such route; use CONNECT or an absolute http:// URL", http.StatusNotFound)
		return
	}
	if m.Key != "" && !s.tokenOK(r.Header) {
		s.deny(m.Name+" model API", "wrong or missing job token")
		http.Error(w, "egress: the model API takes the job's token here", http.StatusUnauthorized)
		return
	}
	if spent, over := s.overBudget(); over {
		s.deny(m.Name+" model API", "over the job's budget")
		http.Error(w, fmt.Sprintf("egress: this job has used its model budget ($%.2f of $%.2f); it may not call the model again", spent, s.policy.MaxCostUSD), http.StatusPaymentRequired)
		return
	}
	if m.Key != "" && !modelPath(m, rest) {
		s.deny(m.Name+" model API /"+rest, "not a model call")
		http.Error(w, "egress: with the platform's key a job may only call the model (messages, responses, models)", http.StatusForbidden)
		return
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(m.Upstream)
		pr.Out.URL.Path, pr.Out.URL.RawPath = "/"+rest, ""
		pr.Out.URL.RawQuery = pr.In.URL.RawQuery
		pr.Out.Header.Del("Proxy-Authorization")
		if m.Key != "" {
			pr.Out.Header.Del("x-api-key")
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Set(m.Header, credential(m))
		}
	}, FlushInterval: -1, ModifyResponse: s.countUsage(m.Name)}
	rp.ServeHTTP(w, r)
}

// modelCalls are the API paths a job may reach with the platform's key, after the route's base
// path and an optional "v1/" (Anthropic's base URL is the origin for Claude Code and ends in
// /v1 for others): calling the model and listing models. The rest of the vendor's API (files,
// batches, fine-tuning, organization and admin endpoints) could reach beyond one job's work, or
// spend where the proxy cannot count it, and is refused. A path ending in "/" admits what lies
// below it; any other must match exactly (Anthropic's message batches live below messages).
var modelCalls = map[string][]string{
	"anthropic": {"messages", "messages/count_tokens", "complete", "models", "models/"},
	"openai":    {"responses", "chat/completions", "completions", "models", "models/"},
}

// modelPath reports whether rest (the request's path after the route name) is a model call.
func modelPath(m Model, rest string) bool {
	p := path.Clean("/" + rest)
	if p != "/"+rest {
		return false // not in its clean form ("..", "//", "/.")
	}
	sub, ok := strings.CutPrefix(p, m.Path+"/")
	if !ok {
		return false // outside the base path
	}
	sub = strings.TrimPrefix(sub, "v1/")
	for _, c := range modelCalls[m.Name] {
		if sub == c || strings.HasSuffix(c, "/") && strings.HasPrefix(sub, c) {
			return true
		}
	}
	return false
}

func (s *Session) route(name string) (Model, bool) {
	for _, m := range s.policy.Models {
		if m.Name == name && m.Upstream != nil {
			return m, true
		}
	}
	return Model{}, false
}

// tokenOK reports whether the request carries the session's token as its API key.
func (s *Session) tokenOK(h http.Header) bool {
	got := h.Get("x-api-key")
	if got == "" {
		got = strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.Token)) == 1
}

func credential(m Model) string {
	if strings.EqualFold(m.Header, "Authorization") {
		return "Bearer " + m.Key
	}
	return m.Key
}
