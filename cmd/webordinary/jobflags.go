package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/webordinary/webordinary/internal/jobenv"
	"github.com/webordinary/webordinary/internal/sandbox"
)

// jobFlags say how a job's processes run: the sandbox and the variables passed on purpose.
type jobFlags struct {
	sandbox  string
	uid, gid int
	readOnly listFlag
	env      listFlag

	sb   *sandbox.Sandbox // set by open
	vars []jobenv.Var
}

func (j *jobFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&j.sandbox, "sandbox", "auto", "run every job (agent, install, build) in a bubblewrap sandbox: auto (sandbox when bwrap works, else warn), required, or off")
	fs.IntVar(&j.uid, "sandbox-uid", sandbox.DefaultUID, "when running as root: the unprivileged uid jobs run as")
	fs.IntVar(&j.gid, "sandbox-gid", sandbox.DefaultGID, "when running as root: the gid jobs run as")
	fs.Var(&j.readOnly, "sandbox-ro", "extra host path jobs see read-only, e.g. a toolchain outside /usr, /opt and PATH (repeatable)")
	fs.Var(&j.env, "job-env", "variable every job's agent and build get: NAME (the value from this process's environment) or NAME=VALUE (repeatable; WO_* refused)")
}

// open probes the sandbox for jobs whose files live under roots, and parses --job-env. data
// is the platform's data directory: when jobs run as another uid it gets search permission for
// others (not read: its contents are not listable), so the job's user can reach the
// workspaces below it; its secrets stay 0600 and outside every sandbox.
func (j *jobFlags) open(log *slog.Logger, data string, roots ...string) error {
	vars, err := jobenv.Parse(j.env)
	if err != nil {
		return fmt.Errorf("--job-env: %w", err)
	}
	if err := searchable(data); err != nil && j.sandbox != string(sandbox.ModeOff) {
		return err
	}
	sb, err := sandbox.New(sandbox.Config{Mode: sandbox.Mode(j.sandbox), UID: j.uid, GID: j.gid, ReadOnly: j.readOnly, Roots: roots})
	if err != nil {
		return fmt.Errorf("--sandbox %s: %w", j.sandbox, err)
	}
	if st := sb.Status(); st.Warning != "" {
		log.Warn("jobs are not sandboxed", slog.String("sandbox", string(st.Mode)), slog.String("why", st.Warning))
	}
	j.sb, j.vars = sb, vars
	return nil
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// searchable adds search permission for others to dir when the platform runs as root (jobs then
// run as another uid) and dir is the platform's own.
func searchable(dir string) error {
	if dir == "" || os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm()&0o001 != 0 {
		return nil
	}
	if err := os.Chmod(dir, fi.Mode().Perm()|0o001); err != nil {
		return fmt.Errorf("let the sandboxed jobs' user reach %s: %w", dir, err)
	}
	return nil
}

// describe is the sandbox line of the startup banner.
func (j *jobFlags) describe() string {
	if j.sb == nil {
		return "none (no workers here)"
	}
	return j.sb.String()
}
