// Package dashboard is webordinary's live web UI: what every worker is doing, which tenants
// wait, every recent job, a page per job with its timeline, live agent output and result, and
// the dead letters an operator can retry or discard.
//
// It is server-rendered HTML (html/template, embedded with go:embed) with a few lines of
// vanilla JavaScript and no front-end build step. Pages update without reloading through
// Server-Sent Events: one shared poller reads [api.ReadStatus] about twice a second while
// anyone watches and pushes re-rendered HTML fragments whenever one changes; a job page
// streams the job's record as it changes and the agent's output lines from a [live.Hub].
//
// Routes (serve mounts Handler at "/"; the JSON API keeps /api/ and /healthz):
//
//	GET  /                                   overview: workers, tenants, recent jobs
//	GET  /events                             SSE: overview fragments as they change
//	GET  /jobs/{id}                          one job: timeline, live output, result
//	GET  /jobs/{id}/events                   SSE: the job's state and output lines
//	POST /jobs/{id}/interrupt                ask the job's owner to stop it
//	POST /tenants/{project}/{user}/release   ask the tenant's owner to release it
//	GET  /dead                               dead letters per tenant
//	POST /dead/{project}/{user}/{job}/retry  re-submit a dead letter as a new job, then remove it
//	POST /dead/{project}/{user}/{job}/discard remove a dead letter
//	GET  /static/...                         the stylesheet and script
//
// Security: every page escapes what it shows (instructions, subjects and output are
// attacker-controlled text); a strict Content-Security-Policy allows only this origin's
// script and style. Every POST carries a per-process CSRF token (hidden form field
// "csrf", or header X-CSRF-Token for fetch, answered with 204). When Config.Token is set,
// every request needs it: "Authorization: Bearer <token>", or "?token=<token>" once, which
// sets an HttpOnly cookie and redirects to the same URL without the token. Without a token
// (serve listens on loopback) only loopback Host names are served, which defeats DNS
// rebinding. Guard puts another handler (the JSON API) behind the same check.
package dashboard
