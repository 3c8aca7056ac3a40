package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/app"
)

// clientFlags locate a running serve and its API token, and choose the output (every command
// that talks to serve).
type clientFlags struct {
	server, token, data string
	json                bool
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.server, "server", "http://127.0.0.1:8080", "URL of a running `webordinary serve`")
	fs.StringVar(&c.token, "token", "", "serve's API token (default: read from <data>/secrets/api-token, on serve's machine)")
	fs.StringVar(&c.data, "data", "", "serve's data directory, where the API token is read from when --token is not given (default: serve's)")
	fs.BoolVar(&c.json, "json", false, "print JSON (for scripts) instead of text for people")
}

// dataDir is --data, else serve's default data directory.
func (c clientFlags) dataDir() (string, error) {
	if c.data != "" {
		return c.data, nil
	}
	return app.DefaultDataDir()
}

// client returns an API client with --token, else the data directory's token (none when
// neither exists: the server then answers 401 and explain says what to do).
func (c clientFlags) client() (*api.Client, error) {
	token := c.token
	if token == "" {
		t, err := readAPIToken(c.data)
		if err != nil {
			return nil, fmt.Errorf("read the API token: %w (or pass --token)", err)
		}
		token = t
	}
	return api.NewClient(c.server, token), nil
}

// errNoToken explains a 401.
var errNoToken = errors.New("serve wants its API token: run this on serve's machine with --data (or WO_DATA) " +
	"set to serve's data directory, or pass --token (or WO_TOKEN) with the content of <data>/secrets/api-token")

// explain turns an API error into what to do next.
func explain(err error) error {
	switch {
	case errors.Is(err, api.ErrUnauthorized):
		return errNoToken
	case errors.Is(err, api.ErrUnreachable):
		return fmt.Errorf("%w (is `webordinary serve` running at that address? set --server)", err)
	}
	return err
}

// printJSON writes v as indented JSON.
func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
