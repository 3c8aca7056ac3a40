package pipeline

import (
	"cmp"
	"net/url"
	"os"
	"strings"

	"github.com/webordinary/webordinary/internal/agent"
	"github.com/webordinary/webordinary/internal/egress"
	"github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/sandbox"
)

// defaultRegistry is npm's registry, allowed unless the job's environment names another.
const defaultRegistry = "https://registry.npmjs.org/"

// openEgress starts the job's egress session: the job's processes then run in a network of
// their own whose only way out is the proxy. Nothing happens without a proxy (Config.Egress)
// or a sandbox (unsandboxed jobs share the host's network).
func (r *run) openEgress() error {
	if r.p.cfg.Egress == nil || !r.p.cfg.Sandbox.Active() {
		return nil
	}
	s, err := r.p.cfg.Egress.Open(r.egressPolicy())
	if err != nil {
		return err
	}
	r.egress = s
	return nil
}

// closeEgress ends the session: the job's token stops working.
func (r *run) closeEgress() {
	if r.egress != nil {
		_ = r.egress.Close()
	}
}

// egressSpec is what the job's jails bind: nil without a session.
func (r *run) egressSpec() *sandbox.Egress {
	if r.egress == nil {
		return nil
	}
	return &sandbox.Egress{Socket: r.egress.Socket, Port: r.p.cfg.Egress.Port()}
}

// egressPolicy allows the npm registry, the git host of the project's remote, the server's and
// the project's --egress-allow hosts, and the model APIs through their routes.
func (r *run) egressPolicy() egress.Policy {
	allow := []string{hostOf(cmp.Or(r.buildVar("npm_config_registry"), r.buildVar("NPM_CONFIG_REGISTRY"), defaultRegistry)),
		hostOf(r.ws.Remote)}
	if agent.Bedrock() {
		allow = append(allow, "*.amazonaws.com") // Bedrock through the AWS chain: the exception
	}
	if spec := agentSpec(r.proj.Agent, r.p.cfg.AgentBaseURL); r.subscription(spec) {
		allow = append(allow, hostOf(realBase(spec, "anthropic")))
	}
	allow = append(append(allow, r.p.cfg.EgressAllow...), r.proj.EgressAllow...)
	return egress.Policy{Allow: allow, Models: r.models(), MaxCostUSD: r.proj.Agent.MaxBudgetUSD}
}

// subscription reports whether a claude agent uses the shared subscription login
// (Config.ClaudeLogin) rather than serve's API key: the exception to the model route. Its
// token is in the agent's config (it is what Claude Code sends) and it reaches the model
// endpoint through a CONNECT tunnel, allowed for that host.
func (r *run) subscription(spec agent.Spec) bool {
	return spec.Kind == agent.KindClaude && r.p.cfg.ClaudeLogin != "" && os.Getenv("ANTHROPIC_API_KEY") == ""
}

// buildVar is a variable the job's install sees (passed on purpose or from the allowlist).
func (r *run) buildVar(name string) string {
	v := ""
	for _, kv := range r.buildConfig().Env {
		if n, val, _ := strings.Cut(kv, "="); n == name {
			v = val
		}
	}
	return v
}

// hostOf is the host (with its port when not the scheme's default) of an http(s) URL; "" for
// other remotes (a local path, ssh).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" {
		return ""
	}
	return u.Host
}

// models are the model routes: Anthropic's and OpenAI's (see realBase), with the platform's
// keys (none: a subscription login's own credential passes through).
func (r *run) models() []egress.Model {
	spec := agentSpec(r.proj.Agent, r.p.cfg.AgentBaseURL)
	var out []egress.Model
	for _, api := range apis {
		if api == "anthropic" && r.subscription(spec) {
			continue
		}
		if m, err := egress.ModelFromEnv(api, realBase(spec, api)); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// apis are the model APIs the proxy serves, by route name.
var apis = []string{"anthropic", "openai"}

// realBase is where the proxy sends the agent's requests for api: the configured base URL when
// the agent speaks api (a command agent: both, a gateway), else the vendor's.
func realBase(spec agent.Spec, api string) string {
	if spec.BaseURL != "" && (provider(spec) == api || spec.Kind == agent.KindCommand) {
		return spec.BaseURL
	}
	return vendorBase(spec, api)
}

// provider is the model API the agent speaks: "anthropic", "openai", or "" (a command agent,
// Bedrock).
func provider(spec agent.Spec) string {
	switch spec.Kind {
	case agent.KindClaude, "":
		if agent.Bedrock() {
			return ""
		}
		return "anthropic"
	case agent.KindCodex:
		return "openai"
	case agent.KindOpencode:
		if p, _, _ := strings.Cut(spec.Model, "/"); p == "openai" {
			return "openai"
		}
		return "anthropic"
	}
	return ""
}

// vendorBase is the real base URL an agent uses when none is configured.
func vendorBase(spec agent.Spec, api string) string {
	switch {
	case api == "openai":
		return "https://api.openai.com/v1"
	case spec.Kind == agent.KindOpencode:
		return "https://api.anthropic.com/v1" // the AI SDK's base includes the version
	}
	return "https://api.anthropic.com"
}

// behindEgress points the agent at the proxy's model routes (Session.AgentEnv, and its spec's
// BaseURL at the route of the API it speaks) with the job's token instead of the platform's
// keys; env are the request's variables, to which it adds the proxy's. Without a session,
// spec and env are returned as they are. Claude on Bedrock keeps its AWS chain.
func (r *run) behindEgress(spec agent.Spec, env []string) (agent.Spec, []string) {
	s := r.egress
	if s == nil {
		return spec, env
	}
	env = append(env, s.Env()...)
	env = append(env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	env = append(env, s.AgentEnv()...)
	if spec.Kind == agent.KindClaude && agent.Bedrock() {
		return spec, env
	}
	if u := s.BaseURL(cmp.Or(provider(spec), "anthropic")); u != "" {
		spec.BaseURL = u
	}
	return spec, env
}

// egressDenied is what the proxy refused the job so far, for its report.
func (r *run) egressDenied() []report.EgressDenial {
	var out []report.EgressDenial
	for _, d := range r.egress.Denied() {
		out = append(out, report.EgressDenial{Target: d.Target, Reason: d.Reason, Count: d.Count})
	}
	return out
}
