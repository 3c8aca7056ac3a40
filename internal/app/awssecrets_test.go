package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// secretsManager is a loopback HTTP server speaking Secrets Manager's JSON protocol
// (GetSecretValue only), holding secrets by ARN. No emulator of Secrets Manager is installed
// here (fauxqs and dynalite do not speak it), so the test serves the protocol itself.
type secretsManager struct {
	*httptest.Server
	calls atomic.Int32
}

func startSecretsManager(t *testing.T, secrets map[string]string) *secretsManager {
	t.Helper()
	sm := &secretsManager{}
	sm.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sm.calls.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		var in struct{ SecretId string }
		if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" || json.NewDecoder(r.Body).Decode(&in) != nil {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"InvalidRequestException","message":"unexpected request"}`))
			return
		}
		v, ok := secrets[in.SecretId]
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"ResourceNotFoundException","message":"Secrets Manager can't find the specified secret."}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ARN": in.SecretId, "Name": in.SecretId[strings.LastIndex(in.SecretId, ":")+1:],
			"SecretString": v, "VersionId": "v1", "VersionStages": []string{"AWSCURRENT"}, "CreatedDate": 1.7e9})
	}))
	t.Cleanup(sm.Close)
	return sm
}

const (
	arnAPIToken = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:acme-wo/api-token-AbCdEf"
	arnGitToken = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:acme-wo/git-token-GhIjKl"
	arnModelKey = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:acme-wo/model-key-MnOpQr"
)

// TestSecretsFromSecretsManagerAtStart: a secret setting (the API token here) or a secret
// variable of the process (WO_GIT_TOKEN, ANTHROPIC_API_KEY) whose value is a Secrets
// Manager ARN stands for the secret: serve reads each once at start, and the API takes the
// secret's value, not the ARN. Not parallel: it sets the process's environment.
func TestSecretsFromSecretsManagerAtStart(t *testing.T) {
	sm := startSecretsManager(t, map[string]string{arnAPIToken: "wo_from-secrets-manager", arnGitToken: "ghp_gittoken",
		arnModelKey: "sk-ant-model\n"})
	t.Setenv("WO_GIT_TOKEN", arnGitToken)
	t.Setenv("ANTHROPIC_API_KEY", arnModelKey)
	t.Setenv("OPENAI_API_KEY", "sk-plain-value")
	cfg := serveConfig(t)
	cfg.Token, cfg.AWS.Endpoint = arnAPIToken, sm.URL
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err := runApp(t, ctx, cfg, func(a *App) {
		defer cancel()
		base := "http://" + a.ln.http.Addr().String() + "/api/status"
		for token, want := range map[string]int{"wo_from-secrets-manager": http.StatusOK, arnAPIToken: http.StatusUnauthorized} {
			req, _ := http.NewRequest(http.MethodGet, base, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("API with token %q: %d, want %d", token, resp.StatusCode, want)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := os.Getenv("WO_GIT_TOKEN"); got != "ghp_gittoken" {
		t.Errorf("WO_GIT_TOKEN = %q, want the secret's value", got)
	}
	if got := os.Getenv("ANTHROPIC_API_KEY"); got != "sk-ant-model" {
		t.Errorf("ANTHROPIC_API_KEY = %q, want the secret's value", got)
	}
	if got := os.Getenv("OPENAI_API_KEY"); got != "sk-plain-value" {
		t.Errorf("OPENAI_API_KEY = %q, a plain value must stay as it is", got)
	}
	if n := sm.calls.Load(); n != 3 {
		t.Errorf("Secrets Manager was asked %d times, want once per secret (3)", n)
	}
}

// TestSecretThatCannotBeReadStopsStart: a secret that is missing (or not allowed) stops serve
// before anything binds, naming the setting and what to check.
func TestSecretThatCannotBeReadStopsStart(t *testing.T) {
	t.Parallel()
	sm := startSecretsManager(t, nil)
	cfg := serveConfig(t)
	cfg.Mail.RelayPassword, cfg.AWS.Endpoint = arnGitToken, sm.URL
	a, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // the old serve ran on
	defer cancel()
	err = a.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "Mail.RelayPassword") || !strings.Contains(err.Error(), "ResourceNotFoundException") ||
		!strings.Contains(err.Error(), "secretsmanager:GetSecretValue") {
		t.Fatalf("Run = %v; want the setting, the service's error and the permission to check", err)
	}
	if _, statErr := os.Stat(cfg.ReadyFile); statErr == nil {
		t.Error("serve got ready with a secret it could not read")
	}
}

// TestAKeyOfAJSONSecretIsRead: ECS's form ARN:json-key:version-stage:version-id picks one key
// of a JSON secret; a key the secret lacks stops start naming the keys it has, and a secret
// that is not JSON says how to fix the ARN.
func TestAKeyOfAJSONSecretIsRead(t *testing.T) {
	t.Parallel()
	const arnRelay = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:acme-wo/relay-StUvWx"
	sm := startSecretsManager(t, map[string]string{arnRelay: `{"user":"ses-smtp","password":"relay-pass","port":587}`,
		arnAPIToken: "plain-token"})
	for _, c := range []struct{ ref, want, fails string }{
		{arnRelay + ":password::", "relay-pass", ""},
		{arnRelay + ":port::", "587", ""},
		{arnRelay + ":password:AWSCURRENT:", "relay-pass", ""},
		{arnRelay + ":pasword::", "", `no key "pasword" (its keys: password, port, user)`},
		{arnAPIToken + ":password::", "", "not a JSON object"},
	} {
		cfg := serveConfig(t)
		cfg.Mail.RelayPassword, cfg.AWS.Endpoint = c.ref, sm.URL
		a, err := New(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = a.readSecrets(t.Context())
		switch {
		case c.fails == "" && (err != nil || a.cfg.Mail.RelayPassword != c.want):
			t.Errorf("%s: %q, %v; want %q", c.ref, a.cfg.Mail.RelayPassword, err, c.want)
		case c.fails != "" && (err == nil || !strings.Contains(err.Error(), c.fails) || !strings.Contains(err.Error(), "Mail.RelayPassword")):
			t.Errorf("%s: %v; want an error naming the setting and saying %q", c.ref, err, c.fails)
		}
	}
}
