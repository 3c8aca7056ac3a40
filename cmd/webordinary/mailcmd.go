package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/mail"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/mail/inbound"
)

const mailUsage = `Usage: webordinary mail <command> [flags]

  send --from ADDRESS INSTRUCTION   email an instruction to a serve started with
                                    mail.local_testing (on this machine; see docs/MAIL.md)
  inspect [FILE]                    how serve's mail router sees a raw message (stdin when no
                                    FILE): thread, instruction, authentication, decision;
                                    nothing is acted on
  quarantine [release|delete ID]    mail set aside as unparseable: list, release or delete
  held [release|drop ID...|all]     mail held because its sender was over a limit: list,
                                    release (run it) or drop
  replies [retry|drop ID...|all]    replies that could not be sent (the relay refused them
                                    or every attempt failed): list, send again or drop
`

func runMail(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError{"mail", fmt.Errorf("missing the command: send, inspect, quarantine, held or replies\n\n%s", mailUsage)}
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(usageOut, mailUsage)
		return flag.ErrHelp
	case "send":
		return mailSend(ctx, args[1:])
	case "inspect":
		return mailInspect(ctx, args[1:])
	case "quarantine":
		return mailQuarantine(ctx, args[1:])
	case "held":
		return mailHeld(ctx, args[1:])
	case "replies":
		return mailReplies(ctx, args[1:])
	}
	return usageError{"mail", fmt.Errorf("unknown mail command %q\n\n%s", args[0], mailUsage)}
}

func mailInspect(ctx context.Context, args []string) error {
	var (
		cf  clientFlags
		env api.MailEnvelope
	)
	fs := newFlags("mail inspect", "[FILE]")
	cf.register(fs)
	fs.StringVar(&env.IP, "ip", "", "connecting IP, for SPF and whether it is one of mail.trusted_relays (as if the message arrived from it)")
	fs.StringVar(&env.Helo, "helo", "", "HELO name")
	fs.StringVar(&env.MailFrom, "mail-from", "", "SMTP MAIL FROM")
	fs.StringVar(&env.Rcpt, "rcpt", "", "SMTP RCPT TO")
	pos, err := parseWith(fs, args, 1)
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
	if err := looksLikeMail(raw, file); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	rep, err := c.InspectMail(ctx, env, raw)
	if err != nil {
		return explain(err)
	}
	if cf.json {
		return printJSON(rep)
	}
	printReport(rep)
	return nil
}

// looksLikeMail refuses input that is not an email at all (no header block with a From).
func looksLikeMail(raw []byte, file string) error {
	if file == "" {
		file = "stdin"
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("%s is not an email: %v (want a raw RFC 5322 message, e.g. a .eml file)", file, err)
	}
	if msg.Header.Get("From") == "" {
		return fmt.Errorf("%s is not an email: it has no From header (want a raw RFC 5322 message, e.g. a .eml file)", file)
	}
	return nil
}

// printReport writes the mail router's report for people.
func printReport(r inbound.Report) {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%s\t%s\n", k, v)
		}
	}
	decision := r.Decision.Action
	if decision == "run" {
		decision = paint("32", decision)
	} else {
		decision = paint("31", decision)
	}
	line("decision", decision+": "+r.Decision.Reason)
	line("from", r.From)
	line("to", strings.Join(r.To, ", "))
	line("subject", r.Subject)
	line("message-id", r.MessageID)
	if r.Thread.Project != "" {
		line("thread", fmt.Sprintf("%s/%s thread %s (by %s)", r.Thread.Project, r.Thread.User, r.Thread.Thread, r.Thread.By))
	}
	if a := r.Auth; a != nil {
		line("sender", fmt.Sprintf("authenticated=%v (%s) %s", a.Pass, a.Source, a.Reason))
	}
	line("instruction", firstLineOf(r.Instruction, 100))
	for i, a := range r.Attachments {
		line(firstOnly(i, "attachments"), fmt.Sprintf("%s (%s, %d bytes)", a.Name, a.ContentType, a.Size))
	}
	line("loop", r.Loop)
	line("problems", strings.Join(r.Problems, "; "))
}

func mailQuarantine(ctx context.Context, args []string) error {
	var cf clientFlags
	fs := newFlags("mail quarantine", "[release ID | delete ID]")
	cf.register(fs)
	pos, err := parseWith(fs, args, 2)
	if err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return listQuarantine(ctx, c, cf.json)
	case len(pos) == 2 && pos[0] == "release":
		err = c.ReleaseQuarantined(ctx, pos[1])
	case len(pos) == 2 && pos[0] == "delete":
		err = c.DeleteQuarantined(ctx, pos[1])
	default:
		return usageError{"mail quarantine", fmt.Errorf("want no argument (list), release ID or delete ID")}
	}
	if err != nil {
		return explain(err)
	}
	fmt.Fprintf(os.Stderr, "%sd %s\n", strings.TrimSuffix(pos[0], "e"), pos[1])
	return nil
}

func listQuarantine(ctx context.Context, c *api.Client, asJSON bool) error {
	q, err := c.Quarantined(ctx)
	if err != nil {
		return explain(err)
	}
	if asJSON {
		return printJSON(q)
	}
	if len(q) == 0 {
		fmt.Println("the quarantine is empty")
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()
	fmt.Fprintln(w, "ID\tRECEIVED\tFROM\tSIZE\tREASON")
	for _, m := range q {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", m.ID, ago(m.ReceivedAt), dash(m.MailFrom), m.Size, firstLineOf(m.Reason, 60))
	}
	return nil
}

// shelf is a list of set-aside items on serve that the operator acts on by ID: the held
// mail, the parked replies.
type shelf struct {
	name, usage, things string // "mail held", its arguments, "held message(s)"
	list                func(ctx context.Context, c *api.Client, asJSON bool) error
	ids                 func(ctx context.Context, c *api.Client) ([]string, error)
	// ops are the actions by their argument ("release"), each with its past tense.
	ops func(c *api.Client) map[string]shelfOp
}

// shelfOp is one action on a shelf's item.
type shelfOp struct {
	do   func(context.Context, string) error
	done string
}

// run lists the shelf without arguments, else runs the action pos[0] on the IDs after it
// ("all": every ID listed now).
func (sh shelf) run(ctx context.Context, args []string) error {
	var cf clientFlags
	fs := newFlags(sh.name, sh.usage)
	cf.register(fs)
	pos, err := parseWith(fs, args, 1<<20)
	if err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return sh.list(ctx, c, cf.json)
	}
	op, ok := sh.ops(c)[pos[0]]
	if !ok || len(pos) < 2 {
		return usageError{sh.name, fmt.Errorf("want no argument (list) or %s", sh.usage)}
	}
	ids := pos[1:]
	if len(ids) == 1 && ids[0] == "all" {
		if ids, err = sh.ids(ctx, c); err != nil {
			return explain(err)
		}
	}
	for _, id := range ids {
		if err := op.do(ctx, id); err != nil {
			return explain(err)
		}
	}
	fmt.Fprintf(os.Stderr, "%s %d %s\n", op.done, len(ids), sh.things)
	return nil
}

func mailHeld(ctx context.Context, args []string) error {
	return shelf{name: "mail held", usage: "[release ID... | drop ID... | release all | drop all]", things: "held message(s)",
		list: listHeld, ids: heldIDs, ops: func(c *api.Client) map[string]shelfOp {
			return map[string]shelfOp{"release": {c.ReleaseHeld, "released"}, "drop": {c.DropHeld, "dropped"}}
		}}.run(ctx, args)
}

func heldIDs(ctx context.Context, c *api.Client) ([]string, error) {
	held, err := c.Held(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(held))
	for i, m := range held {
		ids[i] = m.ID
	}
	return ids, nil
}

func listHeld(ctx context.Context, c *api.Client, asJSON bool) error {
	held, err := c.Held(ctx)
	if err != nil {
		return explain(err)
	}
	if asJSON {
		return printJSON(held)
	}
	if len(held) == 0 {
		fmt.Println("no mail is held")
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()
	fmt.Fprintln(w, "ID\tRECEIVED\tFROM\tSUBJECT\tREASON")
	for _, m := range held {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", m.ID, ago(m.ReceivedAt), dash(cmp.Or(m.From, m.MailFrom)), dash(firstLineOf(m.Subject, 40)), firstLineOf(m.Reason, 60))
	}
	return nil
}

func mailReplies(ctx context.Context, args []string) error {
	return shelf{name: "mail replies", usage: "[retry ID... | drop ID... | retry all | drop all]", things: "parked reply(s)",
		list: listReplies, ids: parkedIDs, ops: func(c *api.Client) map[string]shelfOp {
			return map[string]shelfOp{"retry": {c.RetryReply, "queued again"}, "drop": {c.DropReply, "dropped"}}
		}}.run(ctx, args)
}

func parkedIDs(ctx context.Context, c *api.Client) ([]string, error) {
	parked, err := c.ParkedReplies(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(parked))
	for i, p := range parked {
		ids[i] = p.ID
	}
	return ids, nil
}

func listReplies(ctx context.Context, c *api.Client, asJSON bool) error {
	parked, err := c.ParkedReplies(ctx)
	if err != nil {
		return explain(err)
	}
	if asJSON {
		return printJSON(parked)
	}
	if len(parked) == 0 {
		fmt.Println("no reply is parked: every reply was sent or is on its way")
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()
	fmt.Fprintln(w, "ID\tQUEUED\tTO\tSUBJECT\tERROR")
	for _, p := range parked {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", p.ID, ago(p.Enqueued), dash(strings.Join(p.To, ", ")), dash(firstLineOf(p.Subject, 40)), firstLineOf(p.Error, 60))
	}
	return nil
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
