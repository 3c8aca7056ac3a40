package agent

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/sandbox"
)

// parseFixture feeds a recorded output file to p line by line and judges it.
func parseFixture(t *testing.T, p parser, name string, exitCode int) Result {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		p.line(line)
	}
	res := Result{ExitCode: exitCode, OutputTail: string(b)}
	p.judge(&res)
	return res
}

func TestParseRecordedOutput(t *testing.T) {
	t.Parallel()
	const (
		codexThread    = "0199a213-81c0-7800-8aa1-bbab2a035a53"
		opencodeSess   = "ses_494719016ffe85dkDMj0FPRbHK"
		claudeSession  = "3f8a2c1e-5b7d-4e9f-a1c3-2d4e6f8a0b1c"
		changedHeading = `I changed the home page heading to "Spring sale".`
	)
	tests := []struct {
		fixture string
		parser  parser
		exit    int
		want    Result
		wantErr string
	}{
		{"codex/success.jsonl", &codexParser{}, 0,
			Result{OK: true, Session: codexThread, Summary: changedHeading, Turns: 1}, ""},
		{"codex/success.jsonl", &codexParser{session: "old-thread"}, 0,
			Result{OK: true, Session: codexThread, Summary: changedHeading, Turns: 1}, ""},
		{"codex/success.jsonl", &codexParser{}, 1,
			Result{Session: codexThread, Summary: changedHeading, Turns: 1}, "codex exited with status 1"},
		{"codex/turn-failed.jsonl", &codexParser{}, 1,
			Result{Session: codexThread, Summary: "Looking at the site."}, "codex turn failed: stream disconnected before completion: rate limit reached"},
		{"codex/error.jsonl", &codexParser{}, 1,
			Result{Session: codexThread, Summary: `{"type":"error","message":"unexpected status 401 Unauthorized: Missing bearer or basic authentication in header"}`},
			"codex reported an error: unexpected status 401 Unauthorized"},
		{"opencode/success.jsonl", &opencodeParser{}, 0,
			Result{OK: true, Session: opencodeSess, Summary: changedHeading, Turns: 2, CostUSD: 0.0168}, ""},
		{"opencode/error.jsonl", &opencodeParser{}, 1,
			Result{Session: opencodeSess}, "opencode reported an error: invalid x-api-key"},
		{"opencode/rejected.jsonl", &opencodeParser{}, 0,
			Result{Session: opencodeSess, Summary: "I could not run the build: permission was rejected.", Turns: 1, CostUSD: 0.002},
			"opencode was denied permission for bash"},
		{"claude/denied.jsonl", &claudeParser{session: "requested"}, 0,
			Result{Session: claudeSession, Summary: `The heading now says "Spring sale". I could not run the build.`, Turns: 5, CostUSD: 0.0712},
			"claude was denied permission for Bash (npm run build)"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			t.Parallel()
			got := parseFixture(t, tt.parser, tt.fixture, tt.exit)
			if !strings.Contains(got.Error, tt.wantErr) || (tt.wantErr == "") != (got.Error == "") {
				t.Errorf("Error = %q, want %q", got.Error, tt.wantErr)
			}
			if tt.want.Summary == "" {
				tt.want.Summary = got.Summary // the output tail's last line; not what this checks
			}
			got.Error, got.OutputTail, got.ExitCode = "", "", 0
			if math.Abs(got.CostUSD-tt.want.CostUSD) < 1e-9 {
				got.CostUSD = tt.want.CostUSD
			}
			if got != tt.want {
				t.Errorf("Result = %+v\nwant     %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeSkipsNonEvents(t *testing.T) {
	t.Parallel()
	p := &claudeParser{session: "s"}
	for _, line := range []string{"", "warning: something", "[1,2]", `{"type":"result",`, `{"type":"result","is_error":"yes","result":"kept"}`} {
		p.line([]byte(line))
	}
	if p.result == nil || p.result.Result != "kept" {
		t.Fatalf("result = %+v; want the line with a mistyped field decoded as far as possible", p.result)
	}
}

func TestArgs(t *testing.T) {
	t.Parallel()
	full := Spec{Model: "m1", MaxTurns: 7, MaxBudgetUSD: 2.5}
	newReq := Request{Prompt: "p", SystemPrompt: "rules"}
	resume := Request{Prompt: "p", Session: "s1", Resume: true}
	jailed := Request{Prompt: "p", Jail: jailForArgs(t)}
	tests := []struct {
		name string
		got  []string
		want string
	}{
		{"claude new", claudeArgs(full, newReq, "s0"),
			"-p --output-format stream-json --verbose --permission-mode acceptEdits --model m1 --max-turns 7 --max-budget-usd 2.5 --append-system-prompt=rules --session-id s0"},
		{"claude resume", claudeArgs(Spec{}, resume, "s1"),
			"-p --output-format stream-json --verbose --permission-mode acceptEdits --resume s1"},
		{"codex new", codexArgs(full, newReq),
			"exec --json --skip-git-repo-check --sandbox workspace-write -c check_for_update_on_startup=false -c analytics.enabled=false -c features.plugins=false --model m1 -"},
		{"codex resume", codexArgs(Spec{}, resume),
			"exec --json --skip-git-repo-check --sandbox workspace-write -c check_for_update_on_startup=false -c analytics.enabled=false -c features.plugins=false resume s1 -"},
		{"codex in the platform's sandbox, at a gateway", codexArgs(Spec{BaseURL: "http://127.0.0.1:9/openai/v1"}, jailed),
			"exec --json --skip-git-repo-check --sandbox danger-full-access -c check_for_update_on_startup=false -c analytics.enabled=false -c features.plugins=false -c model_provider=\"webordinary\" " +
				"-c model_providers.webordinary.name=\"webordinary\" -c model_providers.webordinary.base_url=\"http://127.0.0.1:9/openai/v1\" " +
				"-c model_providers.webordinary.env_key=\"OPENAI_API_KEY\" -c model_providers.webordinary.wire_api=\"responses\" " +
				"-c model_providers.webordinary.supports_websockets=false -c model_providers.webordinary.request_max_retries=2 " +
				"-c model_providers.webordinary.stream_max_retries=2 -"},
		{"opencode new", opencodeArgs(full, newReq), "run --format json --model m1"},
		{"opencode resume", opencodeArgs(Spec{}, resume), "run --format json --session s1"},
	}
	for _, tt := range tests {
		if got := strings.Join(tt.got, " "); got != tt.want {
			t.Errorf("%s: args = %q\nwant        %q", tt.name, got, tt.want)
		}
	}
}

func TestClaudeInvokeGeneratesSession(t *testing.T) {
	t.Parallel()
	inv, p := claude{}.invoke(Spec{}, Request{Prompt: "hi", ConfigDir: "/cfg"})
	session := p.(*claudeParser).session
	if len(session) != 36 || !slices.Contains(inv.args, session) || inv.stdin != "hi" {
		t.Fatalf("session %q, args %q, stdin %q", session, inv.args, inv.stdin)
	}
	if !slices.Equal(inv.env, []string{"CLAUDE_CODE_MAX_RETRIES=2", "CLAUDE_CONFIG_DIR=/cfg"}) {
		t.Errorf("env = %q", inv.env)
	}
}

func TestEnviron(t *testing.T) {
	t.Parallel()
	worker := map[string]string{
		"PATH": "/bin", "HOME": "/home/w", "WO_GIT_TOKEN": "secret", "SMTP_PASSWORD": "secret",
		"ANTHROPIC_API_KEY": "ak", "OPENAI_API_KEY": "ok", "AWS_REGION": "eu-west-1",
		"AWS_SECRET_ACCESS_KEY": "aws", "EXTRA": "x",
	}
	lookup := func(bedrock string) lookupFunc {
		return func(k string) (string, bool) {
			if k == "CLAUDE_CODE_USE_BEDROCK" && bedrock != "" {
				return bedrock, true
			}
			v, ok := worker[k]
			return v, ok
		}
	}
	req := Request{Env: []string{"WO_JOB=j", "HOME=/override"}}
	tests := []struct {
		name    string
		ad      adapter
		bedrock string
		pass    []string
		inv     invocation
		want    string
	}{
		{"claude", claude{}, "", nil, invocation{env: []string{"CLAUDE_CODE_MAX_RETRIES=2"}},
			"PATH=/bin HOME=/override ANTHROPIC_API_KEY=ak WO_JOB=j CLAUDE_CODE_MAX_RETRIES=2"},
		{"claude on bedrock", claude{}, "1", nil, invocation{},
			"PATH=/bin HOME=/override ANTHROPIC_API_KEY=ak CLAUDE_CODE_USE_BEDROCK=1 AWS_REGION=eu-west-1 AWS_SECRET_ACCESS_KEY=aws WO_JOB=j"},
		{"codex", codex{}, "", []string{"EXTRA"}, invocation{env: []string{"WO_JOB=adapter wins"}},
			"PATH=/bin HOME=/override OPENAI_API_KEY=ok EXTRA=x WO_JOB=adapter wins"},
		{"opencode", opencode{}, "1", nil, invocation{},
			"PATH=/bin HOME=/override ANTHROPIC_API_KEY=ak OPENAI_API_KEY=ok WO_JOB=j"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := environ(lookup(tt.bedrock), tt.ad, Spec{PassEnv: tt.pass}, req, tt.inv)
			if s := strings.Join(got, " "); s != tt.want {
				t.Errorf("environ = %q\nwant      %q", s, tt.want)
			}
		})
	}
}

// TestBaseURL: Spec.BaseURL points every kind at one model API endpoint in the way that kind
// reads it, with no per-tenant config file.
func TestBaseURL(t *testing.T) {
	t.Parallel()
	const url = "http://gateway.internal:4000/v1"
	req := Request{Prompt: "p", ConfigDir: "/cfg"}
	tests := []struct {
		name string
		ad   adapter
		spec Spec
		want string
	}{
		{"claude", claude{}, Spec{BaseURL: url}, "ANTHROPIC_BASE_URL=" + url},
		{"codex", codex{}, Spec{BaseURL: url}, `model_providers.webordinary.base_url="` + url + `"`},
		{"opencode, model's provider", opencode{}, Spec{BaseURL: url, Model: "openai/gpt-5"},
			`OPENCODE_CONFIG_CONTENT={"provider":{"openai":{"options":{"baseURL":"` + url + `"}}}}`},
		{"opencode, no model", opencode{}, Spec{BaseURL: url},
			`OPENCODE_CONFIG_CONTENT={"provider":{"anthropic":{"options":{"baseURL":"` + url + `"}},"openai":{"options":{"baseURL":"` + url + `"}}}}`},
		{"command", command{}, Spec{BaseURL: url, Command: "true"}, "WO_MODEL_BASE_URL=" + url},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv, _ := tt.ad.invoke(tt.spec, req)
			if !slices.Contains(inv.env, tt.want) && !slices.Contains(inv.args, tt.want) {
				t.Errorf("env %q and args %q lack %q", inv.env, inv.args, tt.want)
			}
			none, _ := tt.ad.invoke(Spec{Command: "true"}, req)
			for _, kv := range slices.Concat(none.env, none.args) {
				if strings.Contains(kv, "BASE_URL") || strings.Contains(kv, "baseURL") {
					t.Errorf("without BaseURL, env has %q", kv)
				}
			}
		})
	}
	if err := validate(Spec{Kind: KindCodex, BaseURL: "gateway:4000"}, Request{Dir: "/d"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a base URL without scheme: %v; want ErrInvalid", err)
	}
}

// jailForArgs is an active jail (only its being active matters to the adapters' arguments);
// it skips the test where bubblewrap cannot run.
func jailForArgs(t *testing.T) *sandbox.Jail {
	t.Helper()
	sb, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeRequired})
	if err != nil {
		t.Skipf("SKIPPED: no sandbox for the sandboxed arguments: %v", err)
	}
	return sb.Jail(sandbox.Spec{})
}
