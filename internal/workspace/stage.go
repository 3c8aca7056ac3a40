package workspace

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/webordinary/webordinary/internal/hostile"
)

// LeftOut is a path of the working tree that Stage did not stage, and why.
type LeftOut struct {
	// Path is repository-relative with "/" separators; a directory's ends in "/".
	Path string `json:"path"`
	// Reason says why, in words for the site's owner.
	Reason string `json:"reason"`
}

// String reads "sub/ (a git repository inside your site)".
func (l LeftOut) String() string { return l.Path + " (" + l.Reason + ")" }

// MaxFileBytes is the largest file Stage stages. Git hosts refuse bigger ones (GitHub at
// 100 MiB), and a commit they refuse would fail every later push of the thread.
const MaxFileBytes = 100 << 20

// Why Stage leaves a path out.
const (
	reasonRepo    = "a git repository inside your site"
	reasonName    = "a name git does not allow"
	reasonLink    = "a symbolic link where git does not allow one"
	reasonBig     = "larger than 100 MiB, more than git hosts accept"
	reasonKind    = "not a file, folder or symbolic link"
	reasonRefused = "git could not add it"
)

// maxRefused bounds the paths Stage leaves out because git itself refused them (see addAll);
// past it, staging fails with git's error.
const maxRefused = 32

// Stage adds the working tree's changes under paths (all of it when none) to the index and
// returns what it left out. It never stages anything under exclude (repository-relative
// directories such as the build output) nor any node_modules, whatever .gitignore says, nor
// what a job can leave in the tree to reach beyond it or to make git fail:
//   - a directory holding a .git entry (a nested repository, or a gitfile pointing at
//     another repository): never a gitlink, nor any file of it; a gitlink already in the
//     index (a submodule the owner recorded) keeps its recorded commit;
//   - a name git refuses, a symbolic link named .gitmodules, .gitattributes, .gitignore or
//     .mailmap, a pipe, socket or device, a file over MaxFileBytes.
//
// Stage lists the paths itself (tracked paths that changed, untracked ones not ignored) and
// hands them to git update-index: no pathspec ever names an ignored path (git add fails on
// one), and the cost stays linear in the number of paths. The platform stages right after
// the agent, so what the build writes later is never committed.
func (w *Workspace) Stage(ctx context.Context, paths, exclude []string) ([]LeftOut, error) {
	skip := cleanDirs(exclude)
	nested, err := nestedRepos(ctx, w.Dir, func(d string) bool { return path.Base(d) == "node_modules" || slices.Contains(skip, d) })
	if err != nil {
		return nil, err
	}
	tracked, untracked, err := w.candidates(ctx, append(skip, nested...))
	if err != nil {
		return nil, err
	}
	var left []LeftOut
	for _, d := range nested {
		left = append(left, LeftOut{Path: d + "/", Reason: reasonRepo})
	}
	p := sortOut(w.Dir, tracked, untracked, under(paths))
	left = append(left, p.left...)
	if err := w.updateIndex(ctx, p.remove, "--force-remove"); err != nil {
		return left, err
	}
	refused, err := w.addAll(ctx, p.add)
	return append(left, refused...), err
}

// cleanDirs makes exclude's directories repository-relative with "/" separators.
func cleanDirs(exclude []string) []string {
	var dirs []string
	for _, e := range exclude {
		if e = strings.Trim(filepath.ToSlash(filepath.Clean(e)), "/"); e != "" && e != "." {
			dirs = append(dirs, e)
		}
	}
	return dirs
}

// candidates lists the tracked paths whose working tree differs from the index (path → the
// index's mode) and the untracked paths .gitignore does not ignore, outside skip and
// node_modules. Git lists an untracked repository as its directory, ending in "/".
func (w *Workspace) candidates(ctx context.Context, skip []string) (map[string]string, []string, error) {
	spec := []string{"--", "."}
	for _, d := range skip {
		spec = append(spec, ":(exclude,literal)"+d)
	}
	spec = append(spec, ":(exclude,glob)**/node_modules/**", ":(exclude,glob)**/node_modules")
	// Sandbox.Own's lchown left every entry's stat data stale: refresh it (reading the content
	// of only those entries), or diff-files would list every tracked path.
	if _, err := w.git(ctx, "update-index", "-q", "--unmerged", "--ignore-submodules", "--refresh"); err != nil {
		return nil, nil, err
	}
	diff, err := w.git(ctx, append([]string{"diff-files", "-z"}, spec...)...)
	if err != nil {
		return nil, nil, err
	}
	others, err := w.git(ctx, append([]string{"ls-files", "-z", "--others", "--exclude-standard"}, spec...)...)
	if err != nil {
		return nil, nil, err
	}
	return parseDiffFiles(diff), splitZ(others), nil
}

// parseDiffFiles reads `git diff-files -z`: ":srcmode dstmode src dst status\0path\0"...
func parseDiffFiles(out string) map[string]string {
	fields, tracked := splitZ(out), map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		if _, seen := tracked[fields[i+1]]; !seen {
			tracked[fields[i+1]] = strings.TrimPrefix(strings.Fields(fields[i])[0], ":")
		}
	}
	return tracked
}

func splitZ(out string) []string {
	var s []string
	for _, f := range strings.Split(out, "\x00") {
		if f != "" {
			s = append(s, f)
		}
	}
	return s
}

// under returns whether a path is at or under one of paths; every path is when there are none.
func under(paths []string) func(string) bool {
	want := map[string]bool{}
	for _, p := range paths {
		want[strings.Trim(filepath.ToSlash(p), "/")] = true
	}
	return func(p string) bool {
		if len(paths) == 0 {
			return true
		}
		for p = strings.Trim(p, "/"); p != "." && p != "" && p != "/"; p = path.Dir(p) {
			if want[p] {
				return true
			}
		}
		return false
	}
}

// plan is what Stage does with each candidate path.
type plan struct {
	add, remove []string
	left        []LeftOut
}

// sortOut decides, for each path wanted, from what is in the working tree there (never
// following a symbolic link), whether to add it, remove it from the index, or leave it out.
func sortOut(dir string, tracked map[string]string, untracked []string, wanted func(string) bool) plan {
	var p plan
	links := map[string]bool{}
	for _, f := range slices.Sorted(maps.Keys(tracked)) {
		if wanted(f) {
			p.sort(dir, f, tracked[f], links)
		}
	}
	for _, f := range untracked {
		if wanted(f) {
			p.sort(dir, f, "", links)
		}
	}
	return p
}

// sort files f (mode is the index's, "" when untracked) into p.
func (p *plan) sort(dir, f, mode string, links map[string]bool) {
	if reason, refused := refusedPath(f); refused {
		if reason != "" {
			p.left = append(p.left, LeftOut{Path: f, Reason: reason})
		}
		return
	}
	if beyondLink(dir, f, links) {
		p.gone(f, mode)
		return
	}
	fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(f)))
	if err != nil {
		p.gone(f, mode)
		return
	}
	p.byType(f, mode, fi)
}

// refusedPath says whether f is left out whatever is there, and why ("" to say nothing).
func refusedPath(f string) (reason string, refused bool) {
	switch {
	case strings.HasSuffix(f, "/"):
		return reasonRepo, true
	case hasNodeModules(f):
		return "", true
	case refusedName(f):
		return reasonName, true
	}
	return "", false
}

// gone: git sees no file at f; a tracked path is removed from the index.
func (p *plan) gone(f, mode string) {
	if mode != "" {
		p.remove = append(p.remove, f)
	}
}

// byType sorts f by what fi (its lstat) says is there.
func (p *plan) byType(f, mode string, fi fs.FileInfo) {
	switch t := fi.Mode().Type(); {
	case t == fs.ModeDir && mode != "160000":
		p.gone(f, mode) // a file became a folder, whose files are untracked; a gitlink stays
	case t == fs.ModeDir:
	case t == fs.ModeSymlink && refusedLink(f):
		p.left = append(p.left, LeftOut{Path: f, Reason: reasonLink})
	case t == fs.ModeSymlink:
		p.add = append(p.add, f)
	case t != 0:
		p.left = append(p.left, LeftOut{Path: f, Reason: reasonKind})
	case fi.Size() > MaxFileBytes:
		p.left = append(p.left, LeftOut{Path: f, Reason: reasonBig})
	default:
		p.add = append(p.add, f)
	}
}

func hasNodeModules(f string) bool { return slices.Contains(strings.Split(f, "/"), "node_modules") }

// beyondLink reports whether a leading directory of f is a symbolic link (git sees no file
// there); links caches the answer per directory.
func beyondLink(dir, f string, links map[string]bool) bool {
	for d := path.Dir(f); d != "."; d = path.Dir(d) {
		isLink, ok := links[d]
		if !ok {
			fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(d)))
			isLink = err == nil && fi.Mode().Type() == fs.ModeSymlink
			links[d] = isLink
		}
		if isLink {
			return true
		}
	}
	return false
}

// refusedName reports whether a component of f is a name git refuses in its index or git
// hosts refuse in a tree: .git as Windows or macOS would read it (any case, trailing dots
// or spaces, the short name git~1, invisible code points), "." or "..".
func refusedName(f string) bool {
	for _, c := range strings.FieldsFunc(f, func(r rune) bool { return r == '/' || r == '\\' }) {
		if c == "." || c == ".." || dotGitLike(c) == ".git" || dotGitLike(c) == "git~1" {
			return true
		}
	}
	return false
}

// refusedLink reports whether f, a symbolic link, is named like a file git reads from the
// tree (git and git hosts refuse those as links).
func refusedLink(f string) bool {
	name := dotGitLike(path.Base(f))
	switch name {
	case ".gitmodules", ".gitattributes", ".gitignore", ".mailmap":
		return true
	}
	return strings.HasPrefix(name, "gitmod~")
}

// dotGitLike is name as a case-insensitive file system that ignores trailing dots and spaces
// and some invisible code points (macOS) reads it, lowercase.
func dotGitLike(name string) string {
	name = strings.Map(func(r rune) rune {
		if r >= 0x200c && r <= 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x206a && r <= 0x206f || r == 0xfeff {
			return -1
		}
		return r
	}, name)
	return strings.ToLower(strings.TrimRight(name, ". "))
}

// updateIndex runs git update-index with flags on paths (verbatim: no pathspec magic).
func (w *Workspace) updateIndex(ctx context.Context, paths []string, flags ...string) error {
	if len(paths) == 0 {
		return nil
	}
	args := append(append([]string{"update-index", "-z"}, flags...), "--stdin")
	_, err := w.gitInput(ctx, strings.NewReader(strings.Join(paths, "\x00")+"\x00"), args...)
	return err
}

// addAll adds paths to the index in one git update-index. Should git refuse one (it stops at
// the first and changes nothing), addAll finds the ones it refuses by halving, leaves those
// out (at most maxRefused) and adds the rest.
func (w *Workspace) addAll(ctx context.Context, paths []string) ([]LeftOut, error) {
	budget := maxRefused
	return w.addHalving(ctx, paths, &budget)
}

func (w *Workspace) addHalving(ctx context.Context, paths []string, budget *int) ([]LeftOut, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	err := w.updateIndex(ctx, paths, "--add", "--remove", "--replace")
	if err == nil || ctx.Err() != nil {
		return nil, err
	}
	if len(paths) == 1 {
		if *budget--; *budget < 0 {
			return nil, err
		}
		return []LeftOut{{Path: paths[0], Reason: reasonRefused}}, nil
	}
	half := len(paths) / 2
	left, err := w.addHalving(ctx, paths[:half], budget)
	if err != nil {
		return left, err
	}
	more, err := w.addHalving(ctx, paths[half:], budget)
	return append(left, more...), err
}

// maxWalk bounds the entries nestedRepos reads. Past it the rest of the tree goes unsearched,
// and what keeps a repository there out of the commit is git's own account: an untracked
// repository is listed as a directory, and Stage never adds a directory.
const maxWalk = 500_000

// nestedRepos lists the directories below the top of the working tree at dir that hold an
// entry named .git (a repository, a gitfile, a link: any type), outermost first, reading
// directory listings only (hostile.Tree.DirsHolding), skipping the directories skip (nil:
// none) says to.
func nestedRepos(ctx context.Context, dir string, skip func(dir string) bool) ([]string, error) {
	t, err := hostile.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace: open the working tree: %w", err)
	}
	defer t.Close()
	return t.DirsHolding(ctx, ".git", skip, maxWalk)
}

// dropNestedRepos removes the .git entry (a repository, a gitfile, a link: never followed) of
// each directory below the top of the working tree that has one. A job left them; git,
// deciding whether it may clean such a directory, reads the repository it names (as root,
// and a pipe there blocks it). What they held is then untracked, and cleaned like the rest.
func (w *Workspace) dropNestedRepos(ctx context.Context) error {
	nested, err := nestedRepos(ctx, w.Dir, nil)
	if err != nil || len(nested) == 0 {
		return err
	}
	t, err := hostile.Open(w.Dir)
	if err != nil {
		return fmt.Errorf("workspace: open the working tree: %w", err)
	}
	defer t.Close()
	for _, d := range nested {
		if err := t.RemoveAll(path.Join(d, ".git")); err != nil {
			return fmt.Errorf("workspace: remove the repository a job left in %s: %w", d, err)
		}
	}
	return nil
}
