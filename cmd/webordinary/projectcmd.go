package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/webordinary/webordinary/internal/project"
)

const projectUsage = `Usage: webordinary project <add|list|show|remove> [flags]

  add     --id ID --repo URL [--agent claude|codex|opencode|command] [--agent-command CMD] ...
  list    every project
  show    --id ID
  remove  --id ID
`

func runProject(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, projectUsage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "add":
		return projectAdd(ctx, args[1:])
	case "list":
		return projectList(ctx, args[1:])
	case "show", "remove":
		return projectOne(ctx, args[0], args[1:])
	}
	return fmt.Errorf("unknown project command %q\n\n%s", args[0], projectUsage)
}

// senders collects repeated --sender ADDRESS=USER flags.
type senders map[string]string

func (s senders) String() string { return fmt.Sprint(map[string]string(s)) }

func (s senders) Set(v string) error {
	addr, user, ok := strings.Cut(v, "=")
	if !ok {
		return errors.New("use ADDRESS=USER, e.g. alice@example.com=alice")
	}
	s[strings.ToLower(strings.TrimSpace(addr))] = strings.TrimSpace(user)
	return nil
}

func projectAdd(ctx context.Context, args []string) error {
	var (
		p  project.Project
		cf clientFlags
	)
	p.Senders = senders{}
	fs := newFlags("project add", "--id ID --repo URL [flags]")
	cf.register(fs)
	fs.StringVar(&p.ID, "id", "", "project id (a-z, 0-9, '-')")
	fs.StringVar(&p.RepoURL, "repo", "", "the site's git repository (https://, ssh://, git@host:path, or a local path)")
	fs.StringVar(&p.DefaultBranch, "default-branch", "main", "branch new threads start from")
	fs.StringVar(&p.BuildCommand, "build-command", "", "build command (default: npm run build when there is a package.json; none otherwise)")
	fs.StringVar(&p.OutputDir, "output-dir", "", "built site directory (default dist/ for npm sites, the repository otherwise)")
	fs.StringVar(&p.Agent.Kind, "agent", "claude", "claude, codex, opencode, or command")
	fs.StringVar(&p.Agent.Command, "agent-command", "", "for --agent command: the shell command; otherwise an optional path to the agent's binary")
	fs.StringVar(&p.Agent.Model, "model", "", "agent model")
	fs.IntVar(&p.Agent.MaxTurns, "max-turns", 30, "agent turn limit (claude)")
	fs.Float64Var(&p.Agent.MaxBudgetUSD, "max-budget-usd", 2, "agent spending limit per job (claude)")
	fs.DurationVar(&p.Agent.WallClock, "agent-timeout", 30*time.Minute, "stop an agent run after this long")
	fs.DurationVar(&p.Agent.NoOutput, "agent-silence", 10*time.Minute, "stop an agent that prints nothing for this long")
	fs.StringVar(&p.InterruptPolicy, "interrupt-policy", "interrupt", "a new instruction interrupts the running job (interrupt) or waits (queue)")
	fs.StringVar(&p.AttachmentsDir, "attachments-dir", "public/attachments", "where attachments land in the repository")
	fs.IntVar(&p.RepairTurns, "repair-turns", 1, "agent turns to fix a failed build")
	fs.Var(senders(p.Senders), "sender", "ADDRESS=USER: mail from ADDRESS acts as USER (repeatable)")
	fs.StringVar(&p.MailAuth, "mail-auth", "aligned", "sender authentication required: aligned (DKIM or SPF aligned with From), dkim, or none (trusted setups only)")
	fs.BoolVar(&p.Acknowledge, "acknowledge", false, "send an acknowledgement with the job's link when an email is accepted")
	fs.Var((*listFlag)(&p.Env), "env", "variable this project's agent and build get: NAME (the worker's value) or NAME=VALUE (stored in the project record; repeatable; WO_* refused)")
	fs.BoolVar(&p.BuildOffline, "build-offline", false, "run the build command without network (the install keeps it)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if p.ID == "" || p.RepoURL == "" {
		return errors.New("--id and --repo are required, e.g. --id my-site --repo https://github.com/me/my-site.git")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	var saved project.Project
	if err := c.call(ctx, http.MethodPut, "/api/projects/"+url.PathEscape(p.ID), p, http.StatusOK, &saved); err != nil {
		return err
	}
	return printJSON(saved)
}

func projectList(ctx context.Context, args []string) error {
	var cf clientFlags
	fs := newFlags("project list", "")
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	var ps []project.Project
	if err := c.call(ctx, http.MethodGet, "/api/projects", nil, http.StatusOK, &ps); err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()
	fmt.Fprintln(w, "ID\tREPO\tAGENT\tPOLICY\tSENDERS")
	for _, p := range ps {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\n", p.ID, p.RepoURL, p.Agent.Kind, p.InterruptPolicy, len(p.Senders))
	}
	return nil
}

func projectOne(ctx context.Context, verb string, args []string) error {
	var (
		cf clientFlags
		id string
	)
	fs := newFlags("project "+verb, "--id ID")
	cf.register(fs)
	fs.StringVar(&id, "id", "", "project id")
	if err := parse(fs, args); err != nil {
		return err
	}
	if id == "" {
		return errors.New("--id is required")
	}
	method, want := http.MethodGet, http.StatusOK
	if verb == "remove" {
		method = http.MethodDelete
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	var out any
	if err := c.call(ctx, method, "/api/projects/"+url.PathEscape(id), nil, want, &out); err != nil {
		return err
	}
	return printJSON(out)
}
