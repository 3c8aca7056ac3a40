package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"net/smtp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/capability"
	"github.com/webordinary/webordinary/internal/demo"
	"github.com/webordinary/webordinary/internal/jobspec"
	jobreport "github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/sandbox"
)

// ownerStages are the owner benchmark's columns between the claim and the reply, in the
// order a job runs them (the pipeline's stage names; shots are the pictures). Stages a run
// reports beyond these (a publish's merge and promote, state restore and save) get their own
// columns after them.
var ownerStages = []string{"git", "install", "build", "agent", "deploy", "shots", "commit", "push"}

// ownerTimeout bounds each mail's wait for its reply (a cold install on a loaded machine
// takes minutes).
const ownerTimeout = 20 * time.Minute

// ownerMail is one of the owner benchmark's emails: from the owner on the thread of the
// previous reply, or, when from is set, from that sender on a new thread.
type ownerMail struct {
	name, body, from string
}

// secondOwner is a second sender of the project: another tenant, with its own workspace.
const secondOwner = "baker@bakery.example"

var ownerMails = []ownerMail{
	{name: "first job", body: "Replace Rye with Wheat in " + demo.AstroPage + ".", from: demoSender},
	{name: "follow-up", body: "Replace Wheat with Spelt in " + demo.AstroPage + "."},
	{name: "publish", body: "publish"},
	{name: "change", body: "Replace Spelt with Rye in " + demo.AstroPage + "."},
	{name: "publish 2", body: "publish"},
	{name: "undo", body: "undo"},
	{name: "new thread", body: "Replace Spelt with Barley in " + demo.AstroPage + ".", from: demoSender},
	{name: "2nd tenant", body: "Replace Spelt with Oat in " + demo.AstroPage + ".", from: secondOwner},
}

// ownerRow is what one email took, from the last byte of its DATA to its reply on disk.
type ownerRow struct {
	name    string
	rec     broker.JobRecord
	sent    time.Time // just before the end of DATA
	replied time.Time // the reply's .eml written
	stages  map[string]int64
}

// benchOwner runs a real Astro site through mail → reply on this machine: serve in process
// on free ports in a fresh data directory, the demo agent, a first job on a new tenant, a
// follow-up on its thread, a publish, another change and its publish, an undo of that (the
// build of the tree it restores is kept), the owner's first job on a new thread, and a second
// tenant's first job (its install from what the first one shared), each by DKIM-signed mail
// over SMTP, and prints the time of
// each stage; without Node.js it says so and skips. packages, when set, is the shared
// package cache to use (kept across runs); else a fresh one, so the first install is cold.
func benchOwner(ctx context.Context, out io.Writer, packages string) error {
	if err := capability.Node.Check(); err != nil {
		fmt.Fprintf(out, "owner: skipped: it builds an Astro site, which needs Node.js and npm (%v): %s\n", err, capability.Node.Get)
		return nil
	}
	tmp, err := os.MkdirTemp("", "wo-bench-owner-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	o, stop, err := ownerServe(ctx, tmp, packages)
	if err != nil {
		return err
	}
	defer stop()
	if err := o.addProject(ctx, filepath.Join(tmp, "site")); err != nil {
		return err
	}
	rows, err := o.mails(ctx)
	cache := "fresh (the first install downloads, the 2nd tenant's installs from what it shared)"
	if packages != "" {
		cache = packages
	}
	fmt.Fprintf(out, "owner: an Astro 5 site by mail on this machine, demo agent, package cache %s; seconds from the end of the mail's DATA\n", cache)
	printOwner(out, rows)
	return err
}

// ownerServe starts serve in process with its data in tmp (which the jobs' user must be
// able to enter), free ports, the demo's DKIM fixture and one worker; stop stops it.
func ownerServe(ctx context.Context, tmp, packages string) (o *ownerRun, stop func(), err error) {
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, nil, err
	}
	if os.Geteuid() == 0 {
		if err := sandbox.Reachable(tmp, sandbox.DefaultUID, sandbox.DefaultGID); err != nil {
			return nil, nil, fmt.Errorf("the jobs' user cannot enter %s: set TMPDIR to a directory it can enter: %w", tmp, err)
		}
	}
	data, ready := filepath.Join(tmp, "data"), filepath.Join(tmp, "ready.json")
	key, dnsFile, err := demoDKIM(data)
	if err != nil {
		return nil, nil, err
	}
	args := []string{"--data", data, "--http", "127.0.0.1:0", "--preview", "127.0.0.1:0", "--smtp", "127.0.0.1:0",
		"--set", "mail.domains=edit.localhost", "--set", "mail.dns_fixture=" + dnsFile, "--nats-listen", "",
		"--workers", "1", "--log-level", "warn", "--ready-file", ready}
	if packages != "" {
		args = append(args, "--set", "worker.packages="+packages)
	}
	sf, err := parseServe(args)
	if err != nil {
		return nil, nil, err
	}
	sf.cfg.Banner = nil // a throwaway server: the table is the output
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- sf.run(sctx) }()
	stop = func() { cancel(); <-served }
	urls, err := awaitReady(ctx, ready, served)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	token, err := readAPIToken(data)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return &ownerRun{c: api.NewClient(urls["api"], token), smtp: urls["smtp"], key: key, outbox: filepath.Join(data, "outbox")}, stop, nil
}

// ownerRun is the owner benchmark's client side: the API, SMTP and the outbox replies go to.
type ownerRun struct {
	c      *api.Client
	smtp   string
	key    ed25519.PrivateKey
	outbox string
}

func (o *ownerRun) addProject(ctx context.Context, dir string) error {
	repo, err := demo.CreateAstroRepo(ctx, dir)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	p := project.Project{ID: "bakery", RepoURL: repo, Senders: map[string]string{demoSender: "owner", secondOwner: "baker"},
		Agent: project.AgentSpec{Kind: "command", Command: "'" + strings.ReplaceAll(self, "'", `'\''`) + "' demo-agent"},
		Env:   []string{"ASTRO_TELEMETRY_DISABLED=1"}}
	_, err = o.c.PutProject(ctx, p)
	return err
}

// mails sends the benchmark's emails one after another, each on the thread of the previous
// reply, and returns a row per email answered.
func (o *ownerRun) mails(ctx context.Context) ([]ownerRow, error) {
	var rows []ownerRow
	to, inReplyTo, from := "", "", ""
	for _, m := range ownerMails {
		if m.from != "" {
			to, inReplyTo, from = "edit@edit.localhost", "", m.from
		}
		row, reply, err := o.one(ctx, m, from, to, inReplyTo)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", m.name, err)
		}
		rows = append(rows, row)
		if row.rec.State != broker.StateDone {
			return rows, fmt.Errorf("%s: the job ended %s: %s", m.name, row.rec.State, row.rec.LastError)
		}
		if to, inReplyTo, err = threadOf(reply); err != nil {
			return rows, fmt.Errorf("%s: the reply: %w", m.name, err)
		}
	}
	return rows, nil
}

// one sends m and waits for its job to end and its reply to be written.
func (o *ownerRun) one(ctx context.Context, m ownerMail, from, to, inReplyTo string) (ownerRow, []byte, error) {
	msg, id, err := o.message(from, to, inReplyTo, m.body)
	if err != nil {
		return ownerRow{}, nil, err
	}
	sent, err := sendTimed(o.smtp, from, to, msg)
	if err != nil {
		return ownerRow{}, nil, err
	}
	rec, err := o.await(ctx, id)
	if err != nil {
		return ownerRow{}, nil, err
	}
	row := ownerRow{name: m.name, rec: rec, sent: sent}
	if rec.Result != nil {
		row.stages = jobreport.Of(*rec.Result).StagesMs
	}
	reply, at, err := o.reply(ctx, rec)
	// A file's time comes from the kernel's coarse clock (a tick behind): a reply written
	// within a tick of the job's end can look older than it.
	row.replied = maxTime(at, rec.FinishedAt)
	return row, reply, err
}

// message is a DKIM-signed email from from to to, on the thread of inReplyTo (a
// Message-ID, "" for a new thread), and its Message-ID.
func (o *ownerRun) message(from, to, inReplyTo, body string) ([]byte, string, error) {
	subject := "Today's special"
	if inReplyTo != "" {
		subject = "Re: " + subject
	}
	raw, err := demo.SampleMessage(from, to, subject, body)
	if err != nil {
		return nil, "", err
	}
	if inReplyTo != "" {
		raw = append([]byte("In-Reply-To: "+inReplyTo+"\r\nReferences: "+inReplyTo+"\r\n"), raw...)
	}
	parsed, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil, "", err
	}
	var signed bytes.Buffer
	err = dkim.Sign(&signed, bytes.NewReader(raw), &dkim.SignOptions{Domain: "bakery.example", Selector: "demo", Signer: o.key})
	return signed.Bytes(), strings.Trim(parsed.Header.Get("Message-Id"), "<> "), err
}

// sendTimed delivers msg over SMTP and returns the time just before the end of its DATA
// (the last byte the owner's server sends).
func sendTimed(addr, from, to string, msg []byte) (time.Time, error) {
	c, err := smtp.Dial(addr)
	if err != nil {
		return time.Time{}, fmt.Errorf("connect to SMTP %s: %w", addr, err)
	}
	defer c.Close()
	if err := c.Mail(from); err != nil {
		return time.Time{}, err
	}
	if err := c.Rcpt(to); err != nil {
		return time.Time{}, err
	}
	w, err := c.Data()
	if err != nil {
		return time.Time{}, err
	}
	if _, err := w.Write(msg); err != nil {
		return time.Time{}, err
	}
	sent := time.Now()
	if err := w.Close(); err != nil {
		return time.Time{}, fmt.Errorf("the intake refused the mail: %w", err)
	}
	return sent, c.Quit()
}

// await waits for the job carried by the email msgID to end.
func (o *ownerRun) await(ctx context.Context, msgID string) (broker.JobRecord, error) {
	for deadline := time.Now().Add(ownerTimeout); time.Now().Before(deadline); {
		st, err := o.c.Status(ctx)
		if err != nil {
			return broker.JobRecord{}, err
		}
		for _, j := range st.Jobs {
			if jobspec.Of(j.Job).MessageID == msgID && j.State.Final() {
				return j, nil
			}
		}
		if err := pause(ctx); err != nil {
			return broker.JobRecord{}, err
		}
	}
	return broker.JobRecord{}, fmt.Errorf("the job did not finish within %s", ownerTimeout)
}

// reply waits for the reply to rec's job (written once the job ended) and returns it and
// when it was written.
func (o *ownerRun) reply(ctx context.Context, rec broker.JobRecord) ([]byte, time.Time, error) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		matches, _ := filepath.Glob(filepath.Join(o.outbox, "*"+rec.Job.ID+"*.eml"))
		for _, p := range matches {
			fi, err := os.Stat(p)
			if err != nil || fi.ModTime().Before(rec.FinishedAt.Add(-time.Second)) {
				continue // not this run's reply (a note sent while the job waited)
			}
			b, err := os.ReadFile(p)
			return b, fi.ModTime(), err
		}
		if err := pause(ctx); err != nil {
			return nil, time.Time{}, err
		}
	}
	return nil, time.Time{}, errors.New("no reply in the outbox within a minute of the job's end")
}

func pause(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(50 * time.Millisecond):
		return nil
	}
}

// threadOf returns where a reply to the reply raw goes (its Reply-To) and its Message-ID.
func threadOf(raw []byte) (to, msgID string, err error) {
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return "", "", err
	}
	addrs, err := m.Header.AddressList("Reply-To")
	if err != nil || len(addrs) == 0 {
		return "", "", fmt.Errorf("no Reply-To: %v", err)
	}
	msgID = m.Header.Get("Message-Id")
	if msgID == "" {
		return "", "", errors.New("no Message-ID")
	}
	return addrs[0].Address, msgID, nil
}

// printOwner prints a row per email: accepted (the end of DATA to the job queued), claimed
// (queued to a worker starting it), the pipeline's stages, other (the run's time outside
// them), reply (the job's end to the reply written) and the total.
func printOwner(out io.Writer, rows []ownerRow) {
	cols := slices.Clone(ownerStages)
	var extra []string
	for _, r := range rows {
		for s := range r.stages {
			if !slices.Contains(cols, s) && !slices.Contains(extra, s) {
				extra = append(extra, s)
			}
		}
	}
	slices.Sort(extra)
	cols = append(cols, extra...)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"email", "state", "accepted", "claimed"}
	for _, c := range cols {
		head = append(head, strings.Replace(c, "shots", "pictures", 1))
	}
	fmt.Fprintln(tw, strings.Join(append(head, "other", "reply", "total"), "\t")+"\t")
	for _, r := range rows {
		cells := []string{r.name, string(r.rec.State), secs(r.rec.Job.AcceptedAt.Sub(r.sent)), secs(r.rec.StartedAt.Sub(r.rec.Job.AcceptedAt))}
		var staged int64
		for _, c := range cols {
			ms, ok := r.stages[c]
			staged += ms
			cell := "-"
			if ok {
				cell = secs(time.Duration(ms) * time.Millisecond)
			}
			cells = append(cells, cell)
		}
		run := r.rec.FinishedAt.Sub(r.rec.StartedAt)
		cells = append(cells, secs(run-time.Duration(staged)*time.Millisecond), secs(r.replied.Sub(r.rec.FinishedAt)), secs(r.replied.Sub(r.sent)))
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	_ = tw.Flush()
}

func maxTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

// secs is d in seconds with two decimals.
func secs(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }
