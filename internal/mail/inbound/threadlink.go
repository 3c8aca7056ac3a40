package inbound

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// A thread link is <base>/t/<payload>.<mac>: payload is base64url("project user thread issued
// expiry", issued in Unix milliseconds, expiry in seconds) naming one thread of one tenant, for
// that tenant's owner. The MAC (keyed apart from reply tokens' and publish links', see
// threadLinkPurpose) makes it unforgeable, the expiry bounds it, and RevokeThreadLinks refuses
// every link to the thread issued until then. It is the only credential of the thread page:
// never the operator's token, never another thread.

// threadLink is an opened thread link.
type threadLink struct {
	token  string
	tenant tenant.ID
	thread string
}

// Thread link errors, shown to whoever follows a link.
var (
	errThreadInvalid = errors.New("this link is not valid")
	errThreadExpired = errors.New("this link has expired; the newest email about your request has a fresh one")
	errThreadRevoked = errors.New("this link was turned off; the newest email about your request has a fresh one")
)

// threadURL is the signed link to job's thread page, or "" when links are off.
func (in *Inbound) threadURL(job broker.Job) string {
	if in.cfg.LinkBase == nil || job.Thread == "" {
		return ""
	}
	base := strings.TrimSuffix(in.cfg.LinkBase(), "/")
	if base == "" {
		return ""
	}
	now := in.cfg.Now()
	fields := []string{job.Tenant.Project, job.Tenant.User, job.Thread,
		strconv.FormatInt(now.UnixMilli(), 10), strconv.FormatInt(now.Add(in.cfg.LinkTTL).Unix(), 10)}
	payload := base64.RawURLEncoding.EncodeToString([]byte(strings.Join(fields, " ")))
	return base + "/t/" + payload + "." + in.mac(threadLinkPurpose, payload)
}

// threadLinkPurpose keys thread links' MACs apart from reply tokens' ("webordinary-thread:"
// and the thread id, token.go), publish links' and the page's form tokens': the same secret
// signs them all, and a MAC of one kind must never be one of another.
const threadLinkPurpose = "webordinary-thread-link:"

// mac signs payload for one purpose.
func (in *Inbound) mac(purpose, payload string) string {
	h := hmac.New(sha256.New, in.cfg.Secret)
	h.Write([]byte(purpose + payload))
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// openThreadLink checks a thread link's token: signature, expiry, revocation.
func (in *Inbound) openThreadLink(ctx context.Context, token string) (threadLink, error) {
	payload, mac, ok := strings.Cut(token, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(in.mac(threadLinkPurpose, payload))) {
		return threadLink{}, errThreadInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return threadLink{}, errThreadInvalid
	}
	f := strings.Split(string(raw), " ")
	if len(f) != 5 {
		return threadLink{}, errThreadInvalid
	}
	issued, err1 := strconv.ParseInt(f[3], 10, 64)
	exp, err2 := strconv.ParseInt(f[4], 10, 64)
	tn, err3 := tenant.New(f[0], f[1])
	if err1 != nil || err2 != nil || err3 != nil {
		return threadLink{}, errThreadInvalid
	}
	if in.cfg.Now().Unix() > exp {
		return threadLink{}, errThreadExpired
	}
	v, _, err := in.cfg.Mail.Get(ctx, revokeKey(tn, f[2]))
	switch {
	case err == nil:
		if at, perr := strconv.ParseInt(string(v), 10, 64); perr != nil || issued <= at {
			return threadLink{}, errThreadRevoked
		}
	case !errors.Is(err, broker.ErrNotFound):
		return threadLink{}, err
	}
	return threadLink{token: token, tenant: tn, thread: f[2]}, nil
}

// revokeKey is the mail table key holding when a thread's links were last revoked.
func revokeKey(tn tenant.ID, thread string) string {
	sum := sha256.Sum256([]byte(tn.String() + " " + thread))
	return "r" + hex.EncodeToString(sum[:16])
}

// RevokeThreadLinks turns off every link to the thread page of tenant tn's thread issued so
// far (a forwarded reply, a lost phone); the next reply carries a fresh one.
func (in *Inbound) RevokeThreadLinks(ctx context.Context, tn tenant.ID, thread string) error {
	if _, err := in.cfg.Mail.Put(ctx, revokeKey(tn, thread), []byte(strconv.FormatInt(in.cfg.Now().UnixMilli(), 10))); err != nil {
		return fmt.Errorf("revoke the links to thread %s: %w", thread, err)
	}
	return nil
}

// RevokeThread is RevokeThreadLinks for a thread known by its id (the operator's view):
// broker.ErrNotFound when there is no such thread.
func (in *Inbound) RevokeThread(ctx context.Context, thread string) error {
	th, err := in.cfg.Threads.Get(ctx, thread)
	if err != nil {
		return err
	}
	return in.RevokeThreadLinks(ctx, th.Tenant, th.ID)
}

// csrfToken is the form token of a thread page: bound to its link, so a page of another
// thread (or a site that does not know the link) cannot make one.
func (in *Inbound) csrfToken(token string) string { return in.mac("webordinary-thread-form:", token) }
