package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/webordinary/webordinary/internal/build"
	"github.com/webordinary/webordinary/internal/hostile"
	"github.com/webordinary/webordinary/internal/jobenv"
	"github.com/webordinary/webordinary/internal/sandbox"
)

// agentDir and homeDir are the tenant's agent state and home, buildHomeDir the home of its
// installs and builds (npm's cache): the only state a job writes besides its workspace. The
// build gets a home of its own so that a package's install script can neither read the agent's
// credentials nor plant settings or hooks that the agent would run in later turns.
func (r *run) agentDir() string     { return filepath.Join(r.state, "agent") }
func (r *run) homeDir() string      { return filepath.Join(r.state, "home") }
func (r *run) buildHomeDir() string { return filepath.Join(r.state, "buildhome") }

// own gives the job's user the workspace (the platform's git wrote it) and its state dirs.
func (r *run) own() error {
	sb := r.p.cfg.Sandbox
	for _, d := range []string{r.agentDir(), r.homeDir(), r.buildHomeDir()} {
		if err := sb.MkdirOwned(d); err != nil {
			return fmt.Errorf("job state %s: %w", d, err)
		}
	}
	return sb.Own(r.ws.Dir)
}

// jail is the sandbox of this job's installs and builds: its workspace (with .git read-only)
// and the build's home, not the agent's state; no network when offline.
func (r *run) jail(offline bool) *sandbox.Jail {
	return r.p.cfg.Sandbox.Jail(sandbox.Spec{
		Writable:  []string{r.ws.Dir, r.buildHomeDir()},
		ReadOnly:  []string{filepath.Join(r.ws.Dir, ".git")},
		NoNetwork: offline,
		Limits:    r.limits(),
		Egress:    r.egressSpec(),
	})
}

// agentJail is the agent's jail: the job's, and the check turn's pictures read-only.
func (r *run) agentJail() *sandbox.Jail {
	spec := sandbox.Spec{Writable: []string{r.ws.Dir, r.agentDir(), r.homeDir()},
		ReadOnly: []string{filepath.Join(r.ws.Dir, ".git")}, Limits: r.limits(), Egress: r.egressSpec()}
	if r.pictures != "" {
		spec.ReadOnly = append(spec.ReadOnly, r.pictures)
	}
	return r.p.cfg.Sandbox.Jail(spec)
}

// limits are the project's own job limits (validated when the project was saved).
func (r *run) limits() sandbox.Limits {
	l, _ := sandbox.ParseLimits(r.proj.JobLimits)
	return l
}

// vars are the variables passed on purpose: global, then the project's (which win).
func (r *run) vars() []jobenv.Var {
	proj, _ := jobenv.Parse(r.proj.Env) // validated when the project was saved
	return append(slices.Clone(r.p.cfg.JobEnv), proj...)
}

// buildConfig is how this job's install and build run: sandboxed, with the build allowlist
// and the passed variables, never the platform's environment.
func (r *run) buildConfig() build.Config {
	names := append(slices.Clone(jobenv.Base), jobenv.Build...)
	env := append(jobenv.Environ(os.LookupEnv, names, r.vars()), "HOME="+r.buildHomeDir())
	if r.egress != nil {
		env = jobenv.Dedup(append(env, r.egress.Env()...))
	}
	sb := r.p.cfg.Sandbox
	return build.Config{StateDir: filepath.Join(r.state, "build"), Timeout: r.p.cfg.BuildTimeout, Env: env,
		Jail: r.jail(false), BuildJail: r.jail(r.proj.BuildOffline),
		Packages: r.p.cfg.Packages, FillEnv: r.fillEnv(), FillJail: r.fillJail, Own: sb.Own, Link: sb.OtherUser()}
}

// fillEnv is the environment of a fill of the shared package cache: the platform's base
// variables and the job's egress, never the project's variables (its registry among them).
func (r *run) fillEnv() []string {
	env := jobenv.Environ(os.LookupEnv, jobenv.Base, nil)
	if r.egress != nil {
		env = jobenv.Dedup(append(env, r.egress.Env()...))
	}
	return env
}

// fillJail is the jail of a fill of the shared package cache: dir (given to the job's user)
// is its only writable path; it has the job's network and limits.
func (r *run) fillJail(dir string) (*sandbox.Jail, error) {
	sb := r.p.cfg.Sandbox
	if err := sb.Own(dir); err != nil {
		return nil, err
	}
	return sb.Jail(sandbox.Spec{Writable: []string{dir}, Limits: r.limits(), Egress: r.egressSpec()}), nil
}

// agentVars are the passed variables resolved for the agent's Request.Env.
func (r *run) agentVars() []string {
	return jobenv.Environ(os.LookupEnv, nil, r.vars())
}

// stageWork stages what the agent changed: everything after the first turn; after a repair
// turn, only the paths whose content changed during it (the build's own writes stay out).
// The build output directory and node_modules are never staged, nor what Stage leaves out
// (nested repositories, gitfiles...), which the result names.
func (r *run) stageWork(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	exclude := r.excluded()
	if r.beforeTurn == nil {
		return r.stageLeavingOut(ctx, nil, exclude)
	}
	after, err := r.snapshot(ctx)
	if err != nil {
		return err
	}
	var changed []string
	for p, h := range after {
		if r.beforeTurn[p] != h {
			changed = append(changed, p)
		}
	}
	for p := range r.beforeTurn {
		if _, ok := after[p]; !ok {
			changed = append(changed, p) // back to HEAD's content: stage that too
		}
	}
	if len(changed) == 0 {
		return nil
	}
	slices.Sort(changed)
	return r.stageLeavingOut(ctx, changed, exclude)
}

func (r *run) excluded() []string {
	plan := build.Detect(r.ws.Dir, r.proj.BuildCommand, r.proj.OutputDir)
	if plan.OutputDir == "." {
		return nil
	}
	return []string{plan.OutputDir}
}

// snapshot maps each path that differs from HEAD to a digest of it ("" when deleted). The
// paths are in the job's tree: a digest reads through package hostile, never follows a link
// and ends with ctx.
func (r *run) snapshot(ctx context.Context) (map[string]string, error) {
	paths, err := r.ws.Status(ctx)
	if err != nil {
		return nil, err
	}
	tree, err := hostile.Open(r.ws.Dir)
	if err != nil {
		return nil, err
	}
	defer tree.Close()
	out := make(map[string]string, len(paths))
	for _, p := range paths {
		if out[p], err = digest(ctx, tree, filepath.FromSlash(p)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// maxDigest bounds the bytes a digest reads; a larger file is told by its size and time.
const maxDigest = 256 << 20

// digest tells apart the states of name: its content's hash for a regular file, its target
// for a link, its type for anything else, "" when it is gone. Only ctx ending is an error.
func digest(ctx context.Context, tree *hostile.Tree, name string) (string, error) {
	fi, err := tree.Lstat(name)
	switch {
	case errors.Is(err, hostile.ErrSymlink):
		return "under a link", nil
	case err != nil:
		return "", nil
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := tree.Readlink(name)
		return "link " + target, nil
	case !fi.Mode().IsRegular():
		return "type " + fi.Mode().Type().String(), nil
	case fi.Size() > maxDigest:
		return fmt.Sprintf("large %d %d", fi.Size(), fi.ModTime().UnixNano()), nil
	}
	h, err := tree.Hash(ctx, name, maxDigest)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err != nil {
		return "changing", nil // replaced or grown since the Lstat
	}
	return h, nil
}
