package agent

import (
	"os"
	"slices"
	"strings"

	"github.com/webordinary/webordinary/internal/jobenv"
)

// baseEnv are the worker's variables every agent may see.
var baseEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR", "TERM"}

// Model credentials, by provider.
var (
	anthropicEnv = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_USE_BEDROCK", "ANTHROPIC_MODEL"}
	// bedrockEnv is passed only when CLAUDE_CODE_USE_BEDROCK is on (Bedrock via the AWS chain).
	bedrockEnv = []string{"AWS_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}
	openaiEnv  = []string{"OPENAI_API_KEY"}
)

// lookupFunc reads the worker's environment (os.LookupEnv outside tests).
type lookupFunc func(string) (string, bool)

// environ is the agent's whole environment: the allowlist and credentials as found in the
// worker's environment, then spec.PassEnv, then req.Env, then the adapter's own variables.
// A later source wins over an earlier one for the same name. Nothing else of the worker's
// environment (push tokens, mail or queue credentials) is ever passed.
func environ(lookup lookupFunc, ad adapter, spec Spec, req Request, inv invocation) []string {
	var env []string
	for _, name := range allowedNames(lookup, ad.credentials(), spec.PassEnv) {
		if v, ok := lookup(name); ok {
			env = append(env, name+"="+v)
		}
	}
	env = append(env, req.Env...)
	env = append(env, inv.env...)
	return jobenv.Dedup(env)
}

// allowedNames lists the variable names the agent may take from the worker's environment.
func allowedNames(lookup lookupFunc, creds, pass []string) []string {
	names := slices.Clone(baseEnv)
	for _, c := range creds {
		if slices.Contains(bedrockEnv, c) && !bedrockOn(lookup) {
			continue
		}
		names = append(names, c)
	}
	return append(names, pass...)
}

// Bedrock reports whether the worker's environment sends Claude Code to Amazon Bedrock
// (CLAUDE_CODE_USE_BEDROCK): the agent then authenticates with AWS credentials.
func Bedrock() bool { return bedrockOn(osLookup) }

func bedrockOn(lookup lookupFunc) bool {
	v, _ := lookup("CLAUDE_CODE_USE_BEDROCK")
	v = strings.ToLower(strings.TrimSpace(v))
	return v == "1" || v == "true"
}

// osLookup is the worker's real environment.
var osLookup lookupFunc = os.LookupEnv
