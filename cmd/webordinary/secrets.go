package main

import "github.com/webordinary/webordinary/internal/app"

// The secrets serve generates live in <data>/secrets (see internal/app); the CLI reads them.
const (
	natsCredsFile = app.EngineCredsFile
	apiTokenFile  = app.APITokenFile
)

// natsCreds are the embedded engine's user and password.
type natsCreds = app.EngineCreds

// secretPath is the secret's file in data ("": serve's default directory).
func secretPath(data, name string) string {
	if data == "" {
		data, _ = app.DefaultDataDir()
	}
	return app.SecretPath(data, name)
}

// readNATSCreds reads the data directory's engine credentials; ok is false when there are none.
func readNATSCreds(data string) (natsCreds, bool, error) { return app.ReadEngineCreds(data) }

// readAPIToken reads the data directory's API token ("": serve's default directory); "" when
// there is none.
func readAPIToken(data string) (string, error) {
	if data == "" {
		d, err := app.DefaultDataDir()
		if err != nil {
			return "", err
		}
		data = d
	}
	return app.ReadAPIToken(data)
}
