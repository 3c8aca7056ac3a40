package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
)

const mailUsage = `Usage: webordinary mail inspect [FILE] [flags]

Prints, as JSON, how a running serve's mail router sees one raw message (stdin when no FILE):
from, to, subject, message-id, thread resolution, the extracted instruction, attachments,
authentication verdicts, loop verdict and the decision (run / ignore / refuse, with the reason).
Nothing is acted on.
`

func runMail(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "inspect" {
		fmt.Fprint(os.Stderr, mailUsage)
		return flag.ErrHelp
	}
	var (
		cf                       clientFlags
		ip, helo, mailFrom, rcpt string
	)
	fs := newFlags("mail inspect", "[FILE]")
	cf.register(fs)
	fs.StringVar(&ip, "ip", "", "connecting IP, for SPF (as if the message arrived from it)")
	fs.StringVar(&helo, "helo", "", "HELO name")
	fs.StringVar(&mailFrom, "mail-from", "", "SMTP MAIL FROM")
	fs.StringVar(&rcpt, "rcpt", "", "SMTP RCPT TO")
	pos, err := parseWith(fs, args[1:], 1)
	if err != nil {
		return err
	}
	file := ""
	if len(pos) == 1 {
		file = pos[0]
	}
	raw, err := readInput(file)
	if err != nil {
		return err
	}
	q := url.Values{"ip": {ip}, "helo": {helo}, "mailfrom": {mailFrom}, "rcpt": {rcpt}}
	c, err := cf.client()
	if err != nil {
		return err
	}
	var report any
	if err := c.call(ctx, http.MethodPost, "/api/mail/inspect?"+q.Encode(), bytes.NewReader(raw), http.StatusOK, &report); err != nil {
		return err
	}
	return printJSON(report)
}

func readInput(file string) ([]byte, error) {
	if file == "" || file == "-" {
		raw, err := io.ReadAll(os.Stdin)
		if err == nil && len(raw) == 0 {
			err = errors.New("no message on stdin: pass a file, or pipe a raw message in")
		}
		return raw, err
	}
	return os.ReadFile(file)
}
