package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/mail/inbound"
	"github.com/webordinary/webordinary/internal/mail/intake"
	"github.com/webordinary/webordinary/internal/mail/outbox"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/tenant"
)

// Errors a Client returns (wrapped in *Error when the server answered).
var (
	// ErrUnauthorized: the server wants a valid API token (401).
	ErrUnauthorized = errors.New("api: unauthorized")
	// ErrNotFound: no such job, project, quarantined or held message, or parked reply (404).
	ErrNotFound = errors.New("api: not found")
	// ErrInvalid: the server refused the request as malformed or invalid (400, 422).
	ErrInvalid = errors.New("api: invalid request")
	// ErrUnreachable: no answer from the server (connection refused, DNS, timeout).
	ErrUnreachable = errors.New("api: server unreachable")
)

// Error is an answer other than the one a call wants. errors.Is matches it against
// ErrUnauthorized, ErrNotFound and ErrInvalid by status code.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Message is the server's "error" field, else the body.
	Message string
}

func (e *Error) Error() string { return e.Message }

// Is maps the status code onto the package's sentinels.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrInvalid:
		return e.Status == http.StatusBadRequest || e.Status == http.StatusUnprocessableEntity
	}
	return false
}

// Client calls a serve's API. The zero HTTP uses http.DefaultClient. A Client is safe for
// concurrent use; no method retries.
type Client struct {
	// Base is the server's URL, like http://127.0.0.1:8080.
	Base string
	// Token is sent as a bearer token when set.
	Token string
	// HTTP sends the requests; nil means http.DefaultClient.
	HTTP *http.Client
}

// NewClient returns a Client for base with token.
func NewClient(base, token string) *Client {
	return &Client{Base: strings.TrimRight(base, "/"), Token: token}
}

// Submit queues a job (POST /api/jobs).
func (c *Client) Submit(ctx context.Context, req router.Request) (broker.JobRecord, error) {
	var rec broker.JobRecord
	return rec, c.do(ctx, http.MethodPost, "/api/jobs", req, http.StatusAccepted, &rec)
}

// Job reads a job (GET /api/jobs/{id}); with wait > 0 (at most 10m) the server answers when the
// job is final or wait has passed, whichever is first.
func (c *Client) Job(ctx context.Context, id string, wait time.Duration) (broker.JobRecord, error) {
	path := "/api/jobs/" + url.PathEscape(id)
	if wait > 0 {
		path += "?wait=" + wait.Round(time.Second).String()
	}
	var rec broker.JobRecord
	return rec, c.do(ctx, http.MethodGet, path, nil, http.StatusOK, &rec)
}

// WaitJob waits until the job is final or timeout has passed, and returns its last record.
func (c *Client) WaitJob(ctx context.Context, id string, timeout time.Duration) (broker.JobRecord, error) {
	deadline := time.Now().Add(timeout)
	for {
		step := min(time.Until(deadline), time.Minute)
		rec, err := c.Job(ctx, id, max(step, time.Second))
		if err != nil || rec.State.Final() || time.Now().After(deadline) {
			return rec, err
		}
	}
}

// Interrupt asks the job's owner to stop it (POST /api/jobs/{id}/interrupt).
func (c *Client) Interrupt(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/api/jobs/"+url.PathEscape(id)+"/interrupt", nil, http.StatusAccepted, nil)
}

// ClaimTenant requests a claim for t now (POST /api/tenants/{project}/{user}/claim).
func (c *Client) ClaimTenant(ctx context.Context, t tenant.ID) (TenantAction, error) {
	var a TenantAction
	return a, c.do(ctx, http.MethodPost, tenantPath(t)+"/claim", nil, http.StatusAccepted, &a)
}

// ReleaseTenant asks t's owner to release it; force takes its lease at once
// (POST /api/tenants/{project}/{user}/release[?force=1]).
func (c *Client) ReleaseTenant(ctx context.Context, t tenant.ID, force bool) (TenantAction, error) {
	path := tenantPath(t) + "/release"
	if force {
		path += "?force=1"
	}
	var a TenantAction
	return a, c.do(ctx, http.MethodPost, path, nil, http.StatusAccepted, &a)
}

func tenantPath(t tenant.ID) string {
	return "/api/tenants/" + url.PathEscape(t.Project) + "/" + url.PathEscape(t.User)
}

// Status reads the system's status (GET /api/status).
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	return st, c.do(ctx, http.MethodGet, "/api/status", nil, http.StatusOK, &st)
}

// Health returns nil when the server and its engine answer (GET /healthz).
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, http.StatusOK, nil)
}

// Projects lists every project (GET /api/projects).
func (c *Client) Projects(ctx context.Context) ([]project.Project, error) {
	var ps []project.Project
	return ps, c.do(ctx, http.MethodGet, "/api/projects", nil, http.StatusOK, &ps)
}

// Project reads one project (GET /api/projects/{id}); ErrNotFound when there is none.
func (c *Client) Project(ctx context.Context, id string) (project.Project, error) {
	var p project.Project
	return p, c.do(ctx, http.MethodGet, "/api/projects/"+url.PathEscape(id), nil, http.StatusOK, &p)
}

// PutProject adds or replaces a project (PUT /api/projects/{id}) and returns it as stored.
func (c *Client) PutProject(ctx context.Context, p project.Project) (project.Project, error) {
	var saved project.Project
	return saved, c.do(ctx, http.MethodPut, "/api/projects/"+url.PathEscape(p.ID), p, http.StatusOK, &saved)
}

// RemoveProject removes a project record (DELETE /api/projects/{id}).
func (c *Client) RemoveProject(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/projects/"+url.PathEscape(id), nil, http.StatusOK, nil)
}

// MailEnvelope is the SMTP envelope a message is inspected as if it arrived with.
type MailEnvelope struct {
	// IP is the connecting client's address (for SPF); Helo its HELO name.
	IP, Helo string
	// MailFrom is the SMTP MAIL FROM; "<>" is a null reverse-path.
	MailFrom string
	// Rcpt is the SMTP RCPT TO.
	Rcpt string
}

// InspectMail reports how the mail router sees raw, acting on nothing (POST /api/mail/inspect).
// A message the intake would quarantine is an error matching ErrInvalid.
func (c *Client) InspectMail(ctx context.Context, env MailEnvelope, raw []byte) (inbound.Report, error) {
	q := url.Values{"ip": {env.IP}, "helo": {env.Helo}, "mailfrom": {env.MailFrom}, "rcpt": {env.Rcpt}}
	var rep inbound.Report
	return rep, c.do(ctx, http.MethodPost, "/api/mail/inspect?"+q.Encode(), bytes.NewReader(raw), http.StatusOK, &rep)
}

// Quarantined lists the mail set aside (GET /api/mail/quarantine).
func (c *Client) Quarantined(ctx context.Context) ([]intake.Quarantined, error) {
	var q []intake.Quarantined
	return q, c.do(ctx, http.MethodGet, "/api/mail/quarantine", nil, http.StatusOK, &q)
}

// ReleaseQuarantined puts a quarantined message back in the spool (POST …/{id}/release).
func (c *Client) ReleaseQuarantined(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/api/mail/quarantine/"+url.PathEscape(id)+"/release", nil, http.StatusOK, nil)
}

// Held lists the mail held over a sender's limit (GET /api/mail/held).
func (c *Client) Held(ctx context.Context) ([]intake.Quarantined, error) {
	var h []intake.Quarantined
	return h, c.do(ctx, http.MethodGet, "/api/mail/held", nil, http.StatusOK, &h)
}

// ReleaseHeld runs a held message (POST /api/mail/held/{id}/release).
func (c *Client) ReleaseHeld(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/api/mail/held/"+url.PathEscape(id)+"/release", nil, http.StatusOK, nil)
}

// DropHeld drops a held message for good (DELETE /api/mail/held/{id}).
func (c *Client) DropHeld(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/mail/held/"+url.PathEscape(id), nil, http.StatusOK, nil)
}

// ParkedReplies lists the replies that could not be sent (GET /api/mail/replies).
func (c *Client) ParkedReplies(ctx context.Context) ([]outbox.Parked, error) {
	var p []outbox.Parked
	return p, c.do(ctx, http.MethodGet, "/api/mail/replies", nil, http.StatusOK, &p)
}

// RetryReply sends a parked reply again (POST /api/mail/replies/{id}/retry).
func (c *Client) RetryReply(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/api/mail/replies/"+url.PathEscape(id)+"/retry", nil, http.StatusOK, nil)
}

// DropReply drops a parked reply for good (DELETE /api/mail/replies/{id}).
func (c *Client) DropReply(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/mail/replies/"+url.PathEscape(id), nil, http.StatusOK, nil)
}

// DeleteQuarantined deletes a quarantined message for good (DELETE …/{id}).
func (c *Client) DeleteQuarantined(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/mail/quarantine/"+url.PathEscape(id), nil, http.StatusOK, nil)
}

// do sends a request and decodes the JSON answer into out (when not nil); a body that is an
// io.Reader is sent as is, any other as JSON. An answer other than want is an *Error.
func (c *Client) do(ctx context.Context, method, path string, body any, want int, out any) error {
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	if resp.StatusCode != want {
		return errorOf(resp, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("api: %s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

func (c *Client) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var r io.Reader
	contentType := ""
	switch b := body.(type) {
	case nil:
	case io.Reader:
		r, contentType = b, "application/octet-stream"
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		r, contentType = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Base, "/")+path, r)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

func errorOf(resp *http.Response, body []byte) *Error {
	var e struct{ Error string }
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return &Error{Status: resp.StatusCode, Message: e.Error}
	}
	msg := strings.TrimSpace(string(body))
	if msg == "" {
		msg = resp.Status
	}
	return &Error{Status: resp.StatusCode, Message: msg}
}
