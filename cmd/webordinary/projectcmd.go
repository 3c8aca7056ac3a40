package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/sandbox"
)

const projectUsage = `Usage: webordinary project <command> [flags]

  add ID --repo URL [flags]   add a project (checks the repository; --force replaces one)
  update ID [flags]           change the flags given, keep the rest (--sender adds a sender)
  list                        every project
  show ID                     one project
  remove ID                   remove a project record

Run 'webordinary project add -h' for the project's flags.
`

func runProject(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError{"project", fmt.Errorf("missing the command: add, update, list, show or remove\n\n%s", projectUsage)}
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(usageOut, projectUsage)
		return flag.ErrHelp
	case "add", "update":
		return projectPut(ctx, args[0], args[1:])
	case "list":
		return projectList(ctx, args[1:])
	case "show", "remove":
		return projectOne(ctx, args[0], args[1:])
	}
	return usageError{"project", fmt.Errorf("unknown project command %q\n\n%s", args[0], projectUsage)}
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

// projectFlags defines a project's flags on fs, bound to p (which gets their defaults).
func projectFlags(fs *flag.FlagSet, p *project.Project) {
	fs.StringVar(&p.ID, "id", "", "project id (a-z, 0-9, '-'); or as the argument")
	fs.StringVar(&p.RepoURL, "repo", "", "the site's git repository (https://, ssh://, git@host:path, or a local path)")
	fs.StringVar(&p.DefaultBranch, "default-branch", "main", "branch new threads start from")
	fs.StringVar(&p.BuildCommand, "build-command", "", "build command (default: npm run build when there is a package.json; none otherwise)")
	fs.StringVar(&p.OutputDir, "output-dir", "", "built site directory (default dist/ for npm sites, the repository otherwise)")
	fs.StringVar(&p.Agent.Kind, "agent", "claude", "claude, codex, opencode, or command")
	fs.StringVar(&p.Agent.Command, "agent-command", "", "for --agent command: the shell command; otherwise an optional path to the agent's binary")
	fs.StringVar(&p.Agent.Model, "model", "", "agent model")
	fs.IntVar(&p.Agent.MaxTurns, "max-turns", 30, "agent turn limit (claude)")
	fs.Float64Var(&p.Agent.MaxBudgetUSD, "max-budget-usd", 2, "agent spending limit per job, in US dollars at list prices: claude's own flag, and the egress proxy refuses any agent's model calls past it")
	fs.DurationVar(&p.Agent.WallClock, "agent-timeout", 30*time.Minute, "stop an agent run after this long")
	fs.DurationVar(&p.Agent.NoOutput, "agent-silence", 10*time.Minute, "stop an agent that prints nothing for this long")
	fs.StringVar(&p.Agent.BaseURL, "agent-base-url", "", "model API endpoint (gateway or proxy) for this project's agent: claude ANTHROPIC_BASE_URL, codex its model provider's base_url (-c), opencode the model provider's baseURL; default: the server's worker.agent_base_url, else the vendor's")
	fs.StringVar(&p.InterruptPolicy, "interrupt-policy", "", "a new instruction on a thread interrupts that thread's running job (interrupt) or waits (queue); default: the server's serve.interrupt_policy")
	fs.StringVar(&p.AttachmentsDir, "attachments-dir", "public/attachments", "where attachments land in the repository")
	fs.IntVar(&p.RepairTurns, "repair-turns", 1, "agent turns to fix a failed build")
	fs.BoolVar(&p.CheckTurn, "check-turn", false, "after the preview and its pictures, give the agent one more turn to look at the pictures and fix an obvious miss before the reply (costs an agent turn; not for --agent command)")
	fs.Var(senders(p.Senders), "sender", "ADDRESS=USER: mail from ADDRESS acts as USER (repeatable)")
	fs.StringVar(&p.MailAuth, "mail-auth", "aligned", "sender authentication required: aligned (DKIM or SPF aligned with From), dkim, or none (trusted setups only)")
	fs.BoolVar(&p.Acknowledge, "acknowledge", false, "send an acknowledgement with the job's link when an email is accepted")
	fs.Var((*listFlag)(&p.Env), "env", "variable this project's agent and build get: NAME (the worker's value) or NAME=VALUE (stored in the project record; repeatable; WO_* refused)")
	fs.BoolVar(&p.BuildOffline, "build-offline", false, "run the build command without network (the install keeps it)")
	fs.StringVar(&p.JobLimits, "job-limits", "", "this project's job limits, e.g. mem=4GiB,procs=512 (see sandbox.job_limits in serve's config; the ones left out are the server's)")
	fs.Var((*listFlag)(&p.EgressAllow), "egress-allow", "HOST, HOST:PORT, *.DOMAIN or * (any public host) this project's jobs may reach besides the npm registry, the remote's git host and the model API (repeatable)")
}

// projectPut is `project add` (a new project; --force replaces one) and `project update`
// (the stored project with the flags given changed).
func projectPut(ctx context.Context, verb string, args []string) error {
	var (
		p            project.Project
		cf           clientFlags
		force, check bool
	)
	p.Senders = senders{}
	fs := newFlags("project "+verb, "ID [--repo URL] [flags]")
	cf.register(fs)
	projectFlags(fs, &p)
	if verb == "add" {
		fs.BoolVar(&force, "force", false, "replace the project if it exists")
	}
	fs.BoolVar(&check, "check-repo", true, "check the repository with `git ls-remote` from here first (--check-repo=false when only serve's machine can reach it)")
	pos, err := parseWith(fs, args, 1)
	if err != nil {
		return err
	}
	if len(pos) == 1 {
		p.ID = pos[0]
	}
	if p.ID == "" || (verb == "add" && p.RepoURL == "") {
		return missing("project "+verb, "webordinary project add my-site --repo https://github.com/me/my-site.git", "the project id", "--repo")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	old, err := c.Project(ctx, p.ID)
	switch {
	case err != nil && !errors.Is(err, api.ErrNotFound):
		return explain(err)
	case verb == "add" && err == nil && !force:
		return fmt.Errorf("project %q exists: change it with `webordinary project update %s --flag value`, or replace it with --force", p.ID, p.ID)
	case verb == "update" && err != nil:
		return explainProject(err, p.ID)
	case verb == "update":
		if err := applyOnto(fs, &p, old, args); err != nil {
			return err
		}
	}
	if check && (verb == "add" || p.RepoURL != old.RepoURL) {
		if err := checkRepo(ctx, p.RepoURL); err != nil {
			return err
		}
	}
	saved, err := c.PutProject(ctx, p)
	if err != nil {
		return explain(err)
	}
	warnUnseen(os.Stderr, saved.Agent)
	if cf.json {
		return printJSON(saved)
	}
	fmt.Printf("project %s %s\n", saved.ID, map[string]string{"add": "added", "update": "updated"}[verb])
	printProject(saved)
	return nil
}

// applyOnto makes p the stored project old with the flags in args applied again (flags set
// their defaults when defined; only the ones given must change old).
func applyOnto(fs *flag.FlagSet, p *project.Project, old project.Project, args []string) error {
	given := p.Senders
	*p = old
	clear(given)
	maps.Copy(given, old.Senders)
	p.Senders = given
	_, err := parseWith(fs, args, 1)
	return err
}

// checkRepo runs `git ls-remote` on repo and says why it failed.
func checkRepo(ctx context.Context, repo string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "ls-remote", "--quiet", "--", repo, "HEAD")
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_SSH_COMMAND=ssh -o BatchMode=yes")
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	why, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n") // git's first line says what was wrong
	if ctx.Err() != nil {
		why = "no answer within 30s"
	}
	return fmt.Errorf("the repository %s cannot be read from here: %s\n(fix the URL or the access; --check-repo=false skips this check when only serve's machine can reach it)", repo, why)
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
	ps, err := c.Projects(ctx)
	if err != nil {
		return explain(err)
	}
	if cf.json {
		return printJSON(ps)
	}
	if len(ps) == 0 {
		fmt.Println("no projects yet: add one with `webordinary project add ID --repo URL`")
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()
	fmt.Fprintln(w, "ID\tREPOSITORY\tBRANCH\tAGENT\tMAIL AUTH\tSENDERS")
	for _, p := range ps {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, p.RepoURL, dash(p.DefaultBranch), p.Agent.Kind, dash(p.MailAuth), senderList(p.Senders))
	}
	return nil
}

func projectOne(ctx context.Context, verb string, args []string) error {
	var (
		cf clientFlags
		id string
	)
	fs := newFlags("project "+verb, "ID")
	cf.register(fs)
	fs.StringVar(&id, "id", "", "project id (or as the argument)")
	pos, err := parseWith(fs, args, 1)
	if err != nil {
		return err
	}
	if len(pos) == 1 {
		id = pos[0]
	}
	if id == "" {
		return missing("project "+verb, "webordinary project "+verb+" my-site", "the project id")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	if verb == "remove" {
		if err := c.RemoveProject(ctx, id); err != nil {
			return explainProject(err, id)
		}
		fmt.Fprintf(os.Stderr, "project %s removed\n", id)
		return nil
	}
	p, err := c.Project(ctx, id)
	if err != nil {
		return explainProject(err, id)
	}
	if cf.json {
		return printJSON(p)
	}
	printProject(p)
	return nil
}

// printProject writes a project's settings for people.
func printProject(p project.Project) {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "  %s\t%s\n", k, v)
		}
	}
	line("repository", p.RepoURL)
	line("branch", p.DefaultBranch)
	agent := p.Agent.Kind
	if p.Agent.Command != "" {
		agent += ": " + p.Agent.Command
	}
	line("agent", agent)
	line("model", p.Agent.Model)
	line("model API", p.Agent.BaseURL)
	if p.Agent.WallClock > 0 {
		line("limits", fmt.Sprintf("%d turns, $%.2f, %s per run, %s silent", p.Agent.MaxTurns, p.Agent.MaxBudgetUSD, human(p.Agent.WallClock), human(p.Agent.NoOutput)))
	}
	line("build", p.BuildCommand)
	line("output", p.OutputDir)
	line("interrupts", cmp.Or(p.InterruptPolicy, "server default"))
	line("check turn", map[bool]string{true: "on: the agent looks at the pictures before the reply", false: "off"}[p.CheckTurn])
	line("mail auth", p.MailAuth)
	line("senders", senderList(p.Senders))
	line("env", strings.Join(p.Env, " "))
	line("job limits", p.JobLimits)
	line("egress allow", strings.Join(p.EgressAllow, " "))
}

func senderList(s map[string]string) string {
	var out []string
	for _, addr := range slices.Sorted(maps.Keys(s)) {
		out = append(out, addr+"="+s[addr])
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}

// warnUnseen warns when the agent's command names a path outside the toolchain every
// sandboxed job sees: unless the workers show it (sandbox.read_only), every job fails at once.
func warnUnseen(w io.Writer, a project.AgentSpec) {
	for _, p := range sandbox.CommandPaths(a.Command) {
		if sandbox.Hidden(p) {
			fmt.Fprintf(w, "warning: jobs run in a sandbox that sees only the toolchain (/usr, /bin, /opt…), PATH and sandbox.read_only paths:"+
				" unless %s is under one of them on the workers, add %s to sandbox.read_only (serve's and workers' config), or the agent cannot run it\n",
				p, filepath.Dir(p))
			return
		}
	}
}
