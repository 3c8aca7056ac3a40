package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// secretARN is a Secrets Manager secret's ARN; its first group is the secret's region. A
// secret setting (secretFields) or variable (secretEnv) whose value is one stands for the
// secret's value, which Run reads once at start: on AWS a task holds the ARNs, not the secrets.
var secretARN = regexp.MustCompile(`^arn:aws[a-z-]*:secretsmanager:([a-z0-9-]+):[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+$`)

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

// secretValue reads the secret arn from Secrets Manager in its own region (AWS.Endpoint, when
// set, instead: an emulator).
func (a *App) secretValue(ctx context.Context, arn string) (string, error) {
	ac, err := a.awsConfig(ctx)
	if err != nil {
		return "", err
	}
	region := secretARN.FindStringSubmatch(arn)[1]
	client := secretsmanager.NewFromConfig(ac, func(o *secretsmanager.Options) {
		o.Region, o.BaseEndpoint = region, endpointOr("", a.cfg.AWS.Endpoint)
	})
	out, err := client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return "", fmt.Errorf("read the secret from Secrets Manager: %w (check that it exists and that this process's role may secretsmanager:GetSecretValue it)", err)
	}
	v := aws.ToString(out.SecretString)
	if out.SecretString == nil {
		v = string(out.SecretBinary)
	}
	if v = strings.TrimSpace(v); v == "" {
		return "", errors.New("the secret in Secrets Manager is empty: put its value (aws secretsmanager put-secret-value)")
	}
	return v, nil
}
