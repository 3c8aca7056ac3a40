package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/mail"
	"net/smtp"
	"os"
	"strings"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/app"
	"github.com/webordinary/webordinary/internal/demo"
)

// Local mail testing: see internal/app (Mail.LocalTesting). `webordinary mail send`, on
// serve's machine, signs with the data directory's key, so its mail is authenticated like real mail.
const (
	localDKIMFile     = app.LocalDKIMFile
	localDKIMSelector = app.LocalDKIMSelector
)

// mailSend is `webordinary mail send`: sign an instruction with the local testing key, ask
// serve how it would route it, and send it over SMTP.
func mailSend(ctx context.Context, args []string) error {
	var (
		cf                      clientFlags
		from, to, subject, addr string
		wait                    bool
	)
	fs := newFlags("mail send", "--from ADDRESS [--wait] INSTRUCTION")
	cf.register(fs)
	fs.StringVar(&from, "from", "", "sender address; a project must list it (project add --sender ADDRESS=USER)")
	fs.StringVar(&to, "to", "edit@edit.localhost", "serve's address (edit@ its mail.domains); reply to a thread with its reply address")
	fs.StringVar(&subject, "subject", "", "subject (default: the instruction's first line)")
	fs.StringVar(&addr, "smtp", "127.0.0.1:2525", "serve's --smtp address (loopback)")
	fs.BoolVar(&wait, "wait", false, "follow the job to its end; exit status 1 unless done")
	pos, err := parseWith(fs, args, 1)
	if err != nil {
		return err
	}
	if from == "" || len(pos) == 0 {
		return missing("mail send", `webordinary mail send --from owner@example.com "make the header green"`, "--from", "the instruction")
	}
	data, err := cf.dataDir()
	if err != nil {
		return err
	}
	raw, msgID, err := localMessage(data, from, to, subject, pos[0])
	if err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	if err := wouldRun(ctx, c, raw, from, to); err != nil {
		return err
	}
	if err := smtp.SendMail(addr, nil, from, []string{to}, raw); err != nil {
		return fmt.Errorf("send over SMTP to %s: %w (is serve's --smtp there?)", addr, err)
	}
	say := func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
	say("sent %s from %s to %s via smtp://%s", msgID, from, to, addr)
	if !wait {
		say("follow it: webordinary status")
		return nil
	}
	return followMail(ctx, c, cf.json, msgID, say)
}

// localMessage composes the instruction as an email and signs it with the local testing key.
func localMessage(data, from, to, subject, instruction string) (raw []byte, msgID string, err error) {
	keyRaw, err := os.ReadFile(secretPath(data, localDKIMFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("no local mail testing key in %s: start serve with --set mail.local_testing=true "+
			"(WO_MAIL_LOCAL_TESTING=true) on this machine; if its data directory is another (its --data, or its user's: "+
			"as root it may be %s), pass it with --data (WO_DATA)", data, app.DefaultSystemData)
	}
	if err != nil {
		return nil, "", err
	}
	key, err := app.ParseLocalKey(keyRaw)
	if err != nil {
		return nil, "", err
	}
	if subject == "" {
		subject = firstLineOf(instruction, 60)
	}
	msg, err := demo.SampleMessage(from, to, subject, instruction)
	if err != nil {
		return nil, "", err
	}
	parsed, _ := mail.ParseAddress(from)
	_, domain, _ := strings.Cut(parsed.Address, "@")
	var out bytes.Buffer
	err = dkim.Sign(&out, bytes.NewReader(msg), &dkim.SignOptions{Domain: domain, Selector: localDKIMSelector, Signer: key})
	if err != nil {
		return nil, "", err
	}
	m, err := mail.ReadMessage(bytes.NewReader(out.Bytes()))
	if err != nil {
		return nil, "", err
	}
	return out.Bytes(), strings.Trim(m.Header.Get("Message-Id"), "<> "), nil
}

// wouldRun asks serve how it would route the message and refuses to send one it would not run.
func wouldRun(ctx context.Context, c *api.Client, raw []byte, from, to string) error {
	rep, err := c.InspectMail(ctx, api.MailEnvelope{IP: "127.0.0.1", Helo: "localhost", MailFrom: from, Rcpt: to}, raw)
	if err != nil {
		return explain(err)
	}
	if rep.Decision.Action == "run" {
		return nil
	}
	hint := ""
	if rep.Auth != nil && !rep.Auth.Pass {
		hint = "\n(is serve running with mail.local_testing, and is --data this serve's data directory?)"
	}
	return fmt.Errorf("not sent: serve would %s it: %s%s", rep.Decision.Action, rep.Decision.Reason, hint)
}

// followMail prints the progress of the job the email carries until it ends.
func followMail(ctx context.Context, c *api.Client, asJSON bool, msgID string, say func(string, ...any)) error {
	rec, err := follow(ctx, c, msgID, say)
	if err != nil {
		return explain(err)
	}
	return waitAndPrint(ctx, c, asJSON, rec.Job.ID, time.Minute)
}
