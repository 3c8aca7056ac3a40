package pipeline_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/build"
	"github.com/webordinary/webordinary/internal/capability"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/tenant"
	"github.com/webordinary/webordinary/internal/worker"
)

// shopSite has one real dependency from npm, pinned with its integrity by the lockfile.
var shopSite = map[string]string{
	"package.json": `{"name":"shop","version":"1.0.0","scripts":{"build":"sh build.sh"},"dependencies":{"is-number":"7.0.0"}}`,
	"package-lock.json": `{"name":"shop","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{` +
		`"":{"name":"shop","version":"1.0.0","dependencies":{"is-number":"7.0.0"}},` +
		`"node_modules/is-number":{"version":"7.0.0","integrity":"sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9cGvNp6NZWZUBlbGXYxxng==","license":"MIT","engines":{"node":">=0.12.0"}}}}`,
	// The build publishes the installed package's digest, so the test reads what each
	// tenant's install put in node_modules.
	"build.sh":   "mkdir -p dist && cp index.html dist/ && sha256sum node_modules/is-number/index.js | cut -c1-64 > dist/sum.txt\n",
	"index.html": "<h1>Hello</h1>\n",
}

// isNumberSum is the digest of is-number 7.0.0's index.js as npm serves it.
const isNumberSum = "04255e482e181687823a95b207802ddd32e746c65dce4c95a5176fc192735960"

// taskAs is task for another user of the project (another tenant).
func taskAs(user, thread, instruction string) worker.Task {
	tk := task(thread, instruction)
	tk.Job.Tenant, _ = tenant.New("site", user)
	return tk
}

// sharedPackages runs the pipeline's jobs sandboxed with a shared package cache in the
// fixture's directory; it returns where the cache is.
func sharedPackages(t *testing.T, dir *string) func(*pipelineConfig) {
	return func(c *pipelineConfig) {
		sandboxed(t)(c)
		*dir = filepath.Join(filepath.Dir(c.Workspaces), "packages")
		c.Packages = &build.Packages{Dir: *dir}
	}
}

// shopWithSharedPackages is the shop site (an npm lockfile) with an agent that puts the
// instruction in its heading, run sandboxed with a shared package cache; it returns the
// fixture and the cache's directory. It skips without Node.js.
func shopWithSharedPackages(t *testing.T) (*fixture, string) {
	t.Helper()
	needNPM(t)
	var shared string
	f := setupConfig(t, shopSite, func(p *project.Project) {
		p.Agent = project.AgentSpec{Kind: "command", Command: `sed -i "s|Hello|$WO_INSTRUCTION|" index.html`}
	}, sharedPackages(t, &shared))
	return f, shared
}

func needNPM(t *testing.T) {
	t.Helper()
	capability.Need(t, capability.Node)
}

// installed is the digest of is-number's index.js that tenant user's last build published.
func (f *fixture) installed(out worker.Outcome) string {
	f.t.Helper()
	if len(out.Report.PreviewURLs) == 0 {
		f.t.Fatalf("no preview: %+v", out.Report)
	}
	_, body := f.page(out.Report.PreviewURLs[0], "/sum.txt")
	return strings.TrimSpace(body)
}

// TestATenantCannotPoisonAnothersPackages: the job is the attacker. Its build (a package's
// install script could do the same) overwrites every file of npm's cache it can reach and
// writes into the shared cache's directory; another tenant's install of the same lockfile
// still gets npm's real package, and the shared cache holds nothing the attacker wrote.
func TestATenantCannotPoisonAnothersPackages(t *testing.T) {
	t.Parallel()
	f, shared := shopWithSharedPackages(t)
	attack := shopSite["build.sh"] + `for f in $(find / \( -path /proc -o -path /sys -o -path /dev -o -path /usr \) -prune -o -type f -path '*cacache*' -print 2>/dev/null); do
  chmod u+w "$f" 2>/dev/null; printf evil > "$f" 2>/dev/null
done
echo evil > ` + shared + `/poison 2>/dev/null
exit 0
`
	f.pushToMain("build.sh", attack)

	alice, err := f.runFor(taskAs("alice", "t1", "Hi"), 5*time.Minute)
	if err != nil {
		t.Fatalf("alice's job: %v %+v", err, alice.Report)
	}
	if got := f.installed(alice); got != isNumberSum {
		t.Fatalf("alice's install: is-number digest %q", got)
	}
	bob, err := f.runFor(taskAs("bob", "t2", "Hey"), 5*time.Minute)
	if err != nil {
		t.Fatalf("bob's job: %v %+v", err, bob.Report)
	}
	if got := f.installed(bob); got != isNumberSum {
		t.Fatalf("bob's install got a package alice's job wrote: is-number digest %q, want %s", got, isNumberSum)
	}
	entries := 0
	err = filepath.WalkDir(shared, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		entries++
		if data, _ := os.ReadFile(p); bytes.Equal(data, []byte("evil")) || bytes.Equal(data, []byte("evil\n")) {
			t.Errorf("the shared cache holds the attacker's %s", p)
		}
		return nil
	})
	if err != nil || entries == 0 {
		t.Fatalf("the shared cache was not filled (%d files): %v", entries, err)
	}
}

// TestNewTenantInstallsFromTheSharedPackages: once one tenant installed a lockfile, a new
// tenant with the same lockfile installs it with npm offline: every package comes from the
// shared cache.
func TestNewTenantInstallsFromTheSharedPackages(t *testing.T) {
	t.Parallel()
	f, _ := shopWithSharedPackages(t)
	start := time.Now()
	alice, err := f.runFor(taskAs("alice", "t1", "Hi"), 5*time.Minute)
	if err != nil {
		t.Fatalf("alice's job: %v %+v", err, alice.Report)
	}
	t.Logf("first tenant: job %v, install %d ms", time.Since(start).Round(time.Millisecond), alice.Report.StagesMs["install"])
	p := f.proj
	p.Env = append(p.Env, "npm_config_offline=true")
	if _, err := f.projects.Put(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	bob, err := f.runFor(taskAs("bob", "t2", "Hey"), 5*time.Minute)
	if err != nil {
		t.Fatalf("bob's install offline: %v %+v", err, bob.Report)
	}
	t.Logf("new tenant: job %v, install %d ms", time.Since(start).Round(time.Millisecond), bob.Report.StagesMs["install"])
	if got := f.installed(bob); got != isNumberSum {
		t.Fatalf("bob's install: is-number digest %q", got)
	}
}

// TestATenantCannotPoisonAnothersModules: the job is the attacker, after an install that
// shares the platform's prepared node_modules. Its build (a package's script run later could
// do the same) tries to write, chmod and truncate every file of its node_modules and plants a
// file in a package; its next job does it again. Another tenant with the same lockfile gets
// the prepared tree (its files are links shared with the store) holding npm's package and
// nothing the attacker wrote, and the store holds nothing the attacker wrote.
func TestATenantCannotPoisonAnothersModules(t *testing.T) {
	t.Parallel()
	f, shared := shopWithSharedPackages(t)
	report := `mkdir -p dist && cp index.html dist/ && sha256sum node_modules/is-number/index.js | cut -c1-64 > dist/sum.txt
ls -a node_modules/is-number > dist/files.txt
stat -c %h node_modules/is-number/index.js > dist/links.txt
`
	attack := report + `for f in $(find node_modules -type f); do
  chmod u+w "$f" 2>/dev/null; printf evil > "$f" 2>/dev/null; truncate -s 0 "$f" 2>/dev/null
done
echo evil > node_modules/is-number/planted 2>/dev/null
echo evil > ` + shared + `/.modules/planted 2>/dev/null
exit 0
`
	f.pushToMain("build.sh", attack)
	for i, thread := range []string{"t1", "t3"} {
		alice, err := f.runFor(taskAs("alice", thread, "Hi"), 5*time.Minute)
		if err != nil {
			t.Fatalf("alice's job %d: %v %+v", i+1, err, alice.Report)
		}
		if got := f.installed(alice); got != isNumberSum {
			t.Fatalf("alice's job %d: is-number digest %q: her writes through the shared files went through", i+1, got)
		}
	}
	bob, err := f.runFor(taskAs("bob", "t2", "Hey"), 5*time.Minute)
	if err != nil {
		t.Fatalf("bob's job: %v %+v", err, bob.Report)
	}
	if got := f.installed(bob); got != isNumberSum {
		t.Fatalf("bob's install got a package alice's job wrote: is-number digest %q, want %s", got, isNumberSum)
	}
	if _, files := f.page(bob.Report.PreviewURLs[0], "/files.txt"); strings.Contains(files, "planted") {
		t.Fatalf("bob's node_modules holds the file alice's job planted: %q", files)
	}
	if _, links := f.page(bob.Report.PreviewURLs[0], "/links.txt"); strings.TrimSpace(links) == "1" {
		t.Fatalf("bob's is-number/index.js has %q links: his install did not share the prepared tree", links)
	}
	err = filepath.WalkDir(filepath.Join(shared, ".modules"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if data, _ := os.ReadFile(p); bytes.HasPrefix(data, []byte("evil")) || len(data) == 0 && d.Name() == "index.js" {
			t.Errorf("the prepared store holds the attacker's %s (%q)", p, data)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the prepared store was not made: %v", err)
	}
}
