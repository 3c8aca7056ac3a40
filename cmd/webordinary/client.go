package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// clientFlags locate a running serve and its API token (every command that talks to serve).
type clientFlags struct{ server, token, data string }

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.server, "server", "http://127.0.0.1:8080", "URL of a running `webordinary serve`")
	fs.StringVar(&c.token, "token", "", "serve's API token (default: read from <data>/secrets/api-token, on serve's machine)")
	fs.StringVar(&c.data, "data", "", "serve's data directory, where the API token is read from when --token is not given (default: serve's)")
}

// client returns an API client with --token, else the data directory's token (none when
// neither exists: the server then answers 401 with what to do).
func (c clientFlags) client() (*apiClient, error) {
	token := c.token
	if token == "" {
		t, err := readAPIToken(c.data)
		if err != nil {
			return nil, fmt.Errorf("read the API token: %w (or pass --token)", err)
		}
		token = t
	}
	return &apiClient{base: strings.TrimRight(c.server, "/"), token: token}, nil
}

// apiClient calls serve's JSON API with its bearer token: the one place the CLI makes HTTP
// requests to serve.
type apiClient struct{ base, token string }

// call sends a request to path (with its query) and decodes the JSON answer into out; a body
// that is not an io.Reader is sent as JSON. An answer other than want is an error.
func (c *apiClient) call(ctx context.Context, method, path string, body any, want int, out any) error {
	var r io.Reader
	contentType := ""
	switch b := body.(type) {
	case nil:
	case io.Reader:
		r, contentType = b, "application/octet-stream"
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return err
		}
		r, contentType = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return doJSON(req, want, out)
}

// errNoToken explains a 401.
var errNoToken = errors.New("serve wants its API token: run this on serve's machine with --data (or WO_DATA) " +
	"set to serve's data directory, or pass --token (or WO_TOKEN) with the content of <data>/secrets/api-token")

func doJSON(req *http.Request, want int, out any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w (is `webordinary serve` running at that address? set --server)", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusUnauthorized {
		return errNoToken
	}
	if resp.StatusCode != want {
		var e struct{ Error string }
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s", e.Error)
		}
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return json.Unmarshal(body, out)
}
