// Package jobenv builds the environment of a job's processes (agent, install, build): an
// allowlist of the platform's variables plus the named variables an operator passes on purpose,
// globally (--job-env) or per project (project add --env). The platform's own secrets
// (WO_GIT_TOKEN, engine and relay passwords, the dashboard token: every WO_* variable) can
// never be passed.
package jobenv

import (
	"fmt"
	"regexp"
	"strings"
)

// Base are the platform's variables every job process may see.
var Base = []string{"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS"}

// Build are the variables a site's install and build may see besides Base: npm's registry
// settings. Credentials for a private registry are passed by name with --job-env.
var Build = []string{"NPM_CONFIG_REGISTRY", "npm_config_registry", "NPM_CONFIG_CAFILE", "npm_config_cafile"}

// Var is a variable passed on purpose: Value from the platform's environment when Set is
// false ("NAME"), else the literal Value ("NAME=VALUE").
type Var struct {
	Name  string
	Value string
	Set   bool
}

var validName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Parse reads "NAME" or "NAME=VALUE" entries, refusing names that are not variable names and
// the platform's own (WO_*).
func Parse(entries []string) ([]Var, error) {
	var out []Var
	for _, e := range entries {
		name, value, set := strings.Cut(e, "=")
		switch {
		case !validName.MatchString(name):
			return nil, fmt.Errorf("job environment %q: want NAME (passed from the platform's environment) or NAME=VALUE", e)
		case strings.HasPrefix(strings.ToUpper(name), "WO_"):
			return nil, fmt.Errorf("job environment %q: WO_* variables are the platform's own (secrets among them) and never reach a job", name)
		}
		out = append(out, Var{Name: name, Value: value, Set: set})
	}
	return out, nil
}

// Environ returns KEY=VALUE for the names found by lookup, then vars (later ones win).
func Environ(lookup func(string) (string, bool), names []string, vars []Var) []string {
	var env []string
	for _, n := range names {
		if v, ok := lookup(n); ok {
			env = append(env, n+"="+v)
		}
	}
	for _, v := range vars {
		if v.Set {
			env = append(env, v.Name+"="+v.Value)
		} else if val, ok := lookup(v.Name); ok {
			env = append(env, v.Name+"="+val)
		}
	}
	return Dedup(env)
}

// Dedup keeps the last value of each name, in order of first appearance.
func Dedup(env []string) []string {
	last := make(map[string]string, len(env))
	var order []string
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		if _, seen := last[name]; !seen {
			order = append(order, name)
		}
		last[name] = val
	}
	out := make([]string, 0, len(order))
	for _, name := range order {
		out = append(out, name+"="+last[name])
	}
	return out
}
