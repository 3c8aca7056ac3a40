package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// secretARN is a Secrets Manager secret's ARN, alone or in ECS's form that picks a key of a
// JSON secret and a version (ARN:json-key:version-stage:version-id, each part possibly
// empty). Its groups are the secret's ARN, its region, the key, the stage and the version. A
// secret setting (secretFields) or variable (secretEnv) whose value is one stands for the
// secret's value, which Run reads once at start: on AWS a task holds the ARNs, not the secrets.
var secretARN = regexp.MustCompile(`^(arn:aws[a-z-]*:secretsmanager:([a-z0-9-]+):[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+)(?::([^:]*):([^:]*):([^:]*))?$`)

// secretEnv are the variables of this process that hold secrets it passes on: the token git
// pushes with and the model keys agents get.
var secretEnv = []string{"WO_GIT_TOKEN", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"}

// secretFields are the settings that hold secrets, by field name.
func (c *Config) secretFields() map[string]*string {
	return map[string]*string{"Token": &c.Token, "EnginePassword": &c.EnginePassword,
		"Mail.Secret": &c.Mail.Secret, "Mail.RelayPassword": &c.Mail.RelayPassword}
}

// readSecrets replaces every secret setting and variable whose value is a Secrets Manager
// ARN with the secret's value (SecretString, or SecretBinary as text; surrounding white space
// trimmed). A secret that cannot be read is an error naming its setting.
func (a *App) readSecrets(ctx context.Context) error {
	read := map[string]string{} // by ARN: each secret is asked for once
	get := func(arn string) (string, error) {
		if v, ok := read[arn]; ok {
			return v, nil
		}
		v, err := a.secretValue(ctx, arn)
		read[arn] = v
		return v, err
	}
	for field, v := range a.cfg.secretFields() {
		if !secretARN.MatchString(*v) {
			continue
		}
		s, err := get(*v)
		if err != nil {
			return &FieldError{Field: field, Value: *v, Err: err}
		}
		*v = s
	}
	for _, name := range secretEnv {
		arn := os.Getenv(name)
		if !secretARN.MatchString(arn) {
			continue
		}
		s, err := get(arn)
		if err != nil {
			return fmt.Errorf("%s=%s: %w", name, arn, err)
		}
		if err := os.Setenv(name, s); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// secretValue reads the secret ref names (secretARN) from Secrets Manager in its own region
// (AWS.Endpoint, when set, instead: an emulator): its value, or with a JSON key that key's.
func (a *App) secretValue(ctx context.Context, ref string) (string, error) {
	ac, err := a.awsConfig(ctx)
	if err != nil {
		return "", err
	}
	m := secretARN.FindStringSubmatch(ref)
	arn, region, key, stage, version := m[1], m[2], m[3], m[4], m[5]
	client := secretsmanager.NewFromConfig(ac, func(o *secretsmanager.Options) {
		o.Region, o.BaseEndpoint = region, endpointOr("", a.cfg.AWS.Endpoint)
	})
	in := &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)}
	if stage != "" {
		in.VersionStage = aws.String(stage)
	}
	if version != "" {
		in.VersionId = aws.String(version)
	}
	out, err := client.GetSecretValue(ctx, in)
	if err != nil {
		return "", fmt.Errorf("read the secret from Secrets Manager: %w (check that it exists and that this process's role may secretsmanager:GetSecretValue it)", err)
	}
	v := aws.ToString(out.SecretString)
	if out.SecretString == nil {
		v = string(out.SecretBinary)
	}
	if key != "" {
		if v, err = jsonKey(v, key); err != nil {
			return "", err
		}
	}
	if v = strings.TrimSpace(v); v == "" {
		return "", errors.New("the secret in Secrets Manager is empty: put its value (aws secretsmanager put-secret-value)")
	}
	return v, nil
}

// jsonKey returns key's value in the JSON object secret: a string, or a number as written.
func jsonKey(secret, key string) (string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(secret), &obj); err != nil {
		return "", fmt.Errorf("the ARN asks for the key %q, but the secret is not a JSON object: drop the key from the ARN, or store the secret as {\"%s\": \"...\"}", key, key)
	}
	raw, ok := obj[key]
	if !ok {
		return "", fmt.Errorf("the secret has no key %q (its keys: %s): fix the key in the ARN", key, strings.Join(slices.Sorted(maps.Keys(obj)), ", "))
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str, nil
	}
	var num json.Number
	if json.Unmarshal(raw, &num) == nil {
		return num.String(), nil
	}
	return "", fmt.Errorf("the secret's key %q holds %s, not a string", key, firstWord(string(raw)))
}

// firstWord is what a JSON value is, for an error: object, array, true, false or null.
func firstWord(raw string) string {
	switch raw = strings.TrimSpace(raw); {
	case strings.HasPrefix(raw, "{"):
		return "an object"
	case strings.HasPrefix(raw, "["):
		return "an array"
	}
	return raw
}
