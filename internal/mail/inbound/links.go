package inbound

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/router"
)

// A publish link is <base>/publish/<payload>.<mac>: payload is base64url("jobID expiry"),
// the job being a done edit whose thread the link publishes, on behalf of that job's sender
// (the thread's authenticated owner). The MAC makes it unforgeable, the expiry bounds it, and
// the mail table records its use, so it works once.

// publishURL is the signed publish link for job's thread, or "" when links are off.
func (in *Inbound) publishURL(_ context.Context, job broker.Job) string {
	if in.cfg.LinkBase == nil {
		return ""
	}
	base := strings.TrimSuffix(in.cfg.LinkBase(), "/")
	if base == "" {
		return ""
	}
	exp := in.cfg.Now().Add(in.cfg.LinkTTL).Unix()
	payload := base64.RawURLEncoding.EncodeToString([]byte(job.ID + " " + strconv.FormatInt(exp, 10)))
	return base + "/publish/" + payload + "." + in.linkMAC(payload)
}

func (in *Inbound) linkMAC(payload string) string {
	h := hmac.New(sha256.New, in.cfg.Secret)
	h.Write([]byte("webordinary-publish:" + payload))
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Link errors, shown to whoever follows a link.
var (
	errLinkInvalid = errors.New("this publish link is not valid")
	errLinkExpired = errors.New("this publish link has expired; reply \"publish\" to the email instead")
	errLinkUsed    = errors.New("this publish link has already been used; reply \"publish\" to the email to publish again")
)

// openLink checks a link token and returns the job it names.
func (in *Inbound) openLink(ctx context.Context, token string) (broker.JobRecord, error) {
	payload, mac, ok := strings.Cut(token, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(in.linkMAC(payload))) {
		return broker.JobRecord{}, errLinkInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return broker.JobRecord{}, errLinkInvalid
	}
	jobID, expS, _ := strings.Cut(string(raw), " ")
	exp, err := strconv.ParseInt(expS, 10, 64)
	if err != nil {
		return broker.JobRecord{}, errLinkInvalid
	}
	if in.cfg.Now().Unix() > exp {
		return broker.JobRecord{}, errLinkExpired
	}
	rec, err := in.cfg.Jobs.Get(ctx, jobID)
	if err != nil || jobspec.Of(rec.Job).From == "" || jobspec.Of(rec.Job).Action != jobspec.ActionEdit {
		return broker.JobRecord{}, errLinkInvalid
	}
	return rec, nil
}

// usedKey is the mail table key recording a link's use.
func usedKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "l" + hex.EncodeToString(sum[:16])
}

// publishByLink uses a link once: it records the use, then submits the publish job.
func (in *Inbound) publishByLink(ctx context.Context, token string) (broker.JobRecord, error) {
	rec, err := in.openLink(ctx, token)
	if err != nil {
		return rec, err
	}
	if _, err := in.cfg.Mail.Create(ctx, usedKey(token), []byte(rec.Job.ID)); errors.Is(err, broker.ErrExists) {
		return rec, errLinkUsed
	} else if err != nil {
		return rec, err
	}
	j, s := rec.Job, jobspec.Of(rec.Job)
	return in.cfg.Router.Submit(ctx, router.Request{Project: j.Tenant.Project, User: j.Tenant.User, Thread: j.Thread,
		Instruction: "publish (from the link in the reply)", From: s.From, Subject: s.Subject, MessageID: s.MessageID,
		References: s.References, Action: jobspec.ActionPublish})
}

var linkPage = template.Must(template.New("publish").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Publish</title><style>` + pageStyle + `</style></head>
<body><main>
{{if .Error}}<p class="error">{{.Error}}</p>{{else if .Done}}<p class="notice">Publishing. You'll get an email with the live address in a moment.</p>
{{else}}<h1>Put the changes from “{{.Subject}}” live?</h1>
{{with .PreviewURL}}<p><a class="button secondary" href="{{.}}" rel="noopener noreferrer">See the preview first</a></p>{{end}}
<form method="post"><button type="submit">Publish: make it live</button></form>{{end}}
</main></body></html>`))

// PublishHandler serves publish links under /publish/: GET shows a confirmation (mail
// scanners follow links; that must not publish), POST publishes. Mount it without the
// dashboard's token: the signed link is the credential.
func (in *Inbound) PublishHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := strings.TrimPrefix(r.URL.Path, "/publish/")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		data := map[string]any{}
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			rec, err := in.openLink(r.Context(), token)
			if err == nil {
				if _, _, used := in.cfg.Mail.Get(r.Context(), usedKey(token)); used == nil {
					err = errLinkUsed
				}
			}
			data["Error"], data["Subject"] = errText(err), jobspec.Of(rec.Job).Subject
			if res := rec.Result; res != nil && len(report.Of(*res).PreviewURLs) > 0 {
				data["PreviewURL"] = report.Of(*res).PreviewURLs[0]
			}
		case http.MethodPost:
			rec, err := in.publishByLink(r.Context(), token)
			data["Error"], data["Done"] = errText(err), err == nil
			in.cfg.Logger.InfoContext(r.Context(), "publish link", slog.String("job", rec.Job.ID), slog.Any("err", err))
		default:
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if data["Error"] != "" {
			w.WriteHeader(http.StatusForbidden)
		}
		if err := linkPage.Execute(w, data); err != nil {
			in.cfg.Logger.WarnContext(r.Context(), "publish page", slog.Any("err", err))
		}
	})
}

func errText(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, errLinkInvalid), errors.Is(err, errLinkExpired), errors.Is(err, errLinkUsed):
		return strings.ToUpper(err.Error()[:1]) + err.Error()[1:] + "."
	}
	return fmt.Sprintf("Something went wrong on our side (%s); please reply \"publish\" to the email instead.", time.Now().UTC().Format(time.RFC3339))
}
